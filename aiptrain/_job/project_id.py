"""The service's rule for project IDs, shared by the CLI's `--project` and the emulator's URLs.

A project ID has 6 to 30 characters: a lowercase letter first, then lowercase letters, digits
and hyphens, not ending with a hyphen. Older projects may carry a domain prefix
(`example.com:my-project`), and APIs accept the project number (digits) in its place.
"""

from __future__ import annotations

import hashlib
import re

_PROJECT_ID = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
_DOMAIN = re.compile(r"[a-z0-9][a-z0-9.-]{0,61}[a-z0-9]")
_PROJECT_NUMBER = re.compile(r"[1-9][0-9]{0,19}")
RULE = ("a project ID has 6 to 30 characters: a lowercase letter first, then lowercase letters, digits "
        "and hyphens, not ending with a hyphen")


def project_id_problem(project: str) -> str | None:
    """Why `project` is not a project ID (or number), or None if it is one."""
    if _PROJECT_NUMBER.fullmatch(project):
        return None
    domain, colon, name = project.rpartition(":")
    if colon and not _DOMAIN.fullmatch(domain):
        return f"{project!r} has an invalid domain prefix {domain!r}"
    if not _PROJECT_ID.fullmatch(name):
        return f"{project!r} is not a valid project ID: {RULE}"
    return None


def suggest_project_id(project: str) -> str:
    """A valid ID close to `project`: `My_Project` -> `my-project`, `ci` -> `ci-project`."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", project.lower()).strip("-")
    if not cleaned[:1].isalpha():
        cleaned = f"p-{cleaned}".rstrip("-")
    if len(cleaned) < 6:
        cleaned = f"{cleaned}-project"
    return cleaned[:30].rstrip("-")


_NUMBER_LOW, _NUMBER_SPAN = 10**11, 9 * 10**11


def project_number_for(project_id: str) -> str:
    """The number a project ID is given here (the emulator's URLs, a job's metadata server): 12
    digits derived from the ID, the same on every machine. A number is its own number."""
    if _PROJECT_NUMBER.fullmatch(project_id):
        return project_id
    digest = int.from_bytes(hashlib.sha256(project_id.encode()).digest()[:8], "big")
    return str(_NUMBER_LOW + digest % _NUMBER_SPAN)
