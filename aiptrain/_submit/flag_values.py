"""From the values of the submit flags to one `SubmitOptions`: the command line and the Python API both come here.

The command line hands over the text it was given (a repeated --labels as a tuple of texts); the
Python API hands over `submit`'s keyword arguments, which may also be Python values: a count as an
int, labels as a mapping, packages as a list, an accelerator as a (type, count) pair, a switch or a
true/false flag as a bool. Each `Kind` of flag has one parser here that takes either form and
checks it with the syntax parsers of `flags`, so a value is accepted, or refused with the same
problem (the flag named, a fix suggested), whichever door it came through.

Problems are returned, not raised: the submit path reports them together with the job's own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiptrain._submit import flags
from aiptrain._submit.flags import FLAGS_BY_NAME, OPTION_FLAGS, PAIRED_FLAGS, SUBMIT_FLAGS, Kind
from aiptrain.errors import Problem, ProblemList

if TYPE_CHECKING:
    from aiptrain._job.catalog import Catalog
    from aiptrain._submit.submission import SubmitOptions

# Where `--storage` stages the trainer packages: this machine's store, or Cloud Storage.
STORAGE_KINDS = ("local", "gcs")

# The names the submit flags go by in Python (`submit(master_machine_type=...)`): their `dest`s.
FLAG_NAMES = frozenset(entry.dest for entry in SUBMIT_FLAGS)

Parser = Callable[[str, Any, ProblemList, "Catalog"], Any]


def build_submit_options(job_id: str, values: Mapping[str, Any], *, catalog: Catalog, project: str | None,
                         region: str | None = None, default_region: str | None = None,
                         user_args: list[str] | None = None, config_body: dict[str, Any] | None = None,
                         ) -> tuple[SubmitOptions, list[Problem]]:
    """SubmitOptions from the flags' values by their `dest` (absent or None: not given), and the
    problems of those values. `project` completes a short --kms-key when --kms-project is not given."""
    from aiptrain._submit.submission import SubmitOptions

    problems = ProblemList()
    for type_flag, count_flag in PAIRED_FLAGS:
        flags.group_pair(problems, type_flag, values.get(FLAGS_BY_NAME[type_flag].dest),
                         count_flag, values.get(FLAGS_BY_NAME[count_flag].dest))
    if values.get("master_image_uri") and values.get("runtime_version"):
        problems.add("--runtime-version", "only one of --master-image-uri and --runtime-version can be set",
                     "a custom container brings its own runtime")
    parsed = {entry.dest: PARSERS[entry.kind](entry.flag, values.get(entry.dest), problems, catalog)
              for entry in OPTION_FLAGS}
    parsed["kms_key"] = flags.kms_key_name(parsed["kms_key"], _kms_part("--kms-keyring", values, problems),
                                           _kms_part("--kms-location", values, problems),
                                           _kms_part("--kms-project", values, problems) or project, problems)
    options = SubmitOptions(job_id=job_id, region=region, default_region=default_region, user_args=user_args,
                            config_body=config_body, **parsed)
    return options, problems.problems


def parse_storage(value: str | None, out: ProblemList) -> str | None:
    """`--storage`: local or gcs; None leaves the choice to the backend."""
    if value is None or value in STORAGE_KINDS:
        return value
    out.add("--storage", f"{value!r} is not a place to stage packages", f"use one of: {', '.join(STORAGE_KINDS)}")
    return None


def _kms_part(flag: str, values: Mapping[str, Any], out: ProblemList) -> str | None:
    return _text(flag, values.get(FLAGS_BY_NAME[flag].dest), out, None)


def _refuse(flag: str, value: Any, expected: str, example: str, out: ProblemList) -> None:
    out.add(flag, f"{value!r} is not {expected}", f"pass {example}")


def _text(flag: str, value: Any, out: ProblemList, catalog: Catalog | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    _refuse(flag, value, "text", f"{flag} as a string", out)
    return None


def _path(flag: str, value: Any, out: ProblemList, catalog: Catalog | None) -> Path | None:
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        return Path(value)
    _refuse(flag, value, "a path", f"{flag} as a path or a string", out)
    return None


def _count(flag: str, value: Any, out: ProblemList, catalog: Catalog | None) -> int | None:
    """A whole number >= 1: an int, or its digits as text (a bool is not a count)."""
    if value is None:
        return None
    number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, str):
        try:
            number = int(value)
        except ValueError:
            pass
    if number is None:
        _refuse(flag, value, "a whole number", f"{flag} 1 or more, or leave {flag} out", out)
        return None
    return flags.parse_count(flag, number, out)


def _scale_tier(flag: str, value: Any, out: ProblemList, catalog: Catalog) -> str | None:
    return flags.parse_scale_tier(_text(flag, value, out, catalog), out, catalog)


def _accelerator(flag: str, value: Any, out: ProblemList, catalog: Catalog) -> Any:
    """`type=nvidia-tesla-t4,count=1`, or in Python a (type, count) pair or an `Accelerator`."""
    from aiptrain._submit.submission import Accelerator

    if value is None:
        return None
    if isinstance(value, str):
        parsed = flags.parse_accelerator(flag, value, out, catalog)
    elif isinstance(value, Accelerator):
        parsed = flags.check_accelerator(flag, value.type, str(value.count), out, catalog)
    elif isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], str):
        parsed = flags.check_accelerator(flag, value[0], str(value[1]), out, catalog)
    else:
        _refuse(flag, value, "an accelerator", "type=nvidia-tesla-t4,count=1 (in Python also ('nvidia-tesla-t4', 1))",
                out)
        return None
    return Accelerator(*parsed) if parsed else None


def _bool_word(flag: str, value: Any, out: ProblemList, catalog: Catalog | None) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    return flags.parse_bool_word(flag, _text(flag, value, out, catalog), out)


def _switch(flag: str, value: Any, out: ProblemList, catalog: Catalog | None) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    _refuse(flag, value, "true or false", f"{flag}=True, or leave {flag} out", out)
    return None


def _labels(flag: str, value: Any, out: ProblemList, catalog: Catalog | None) -> dict[str, str] | None:
    """KEY=VALUE,... texts (the flag may be repeated), or in Python a mapping."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return dict(value)
    texts = (value,) if isinstance(value, str) else value
    if isinstance(texts, (tuple, list)) and all(isinstance(text, str) for text in texts):
        return flags.parse_labels(tuple(texts), out, flag=flag)
    _refuse(flag, value, "labels", f"{flag} team=ml,env=dev (in Python also {{'team': 'ml'}})", out)
    return None


def _packages(flag: str, value: Any, out: ProblemList, catalog: Catalog | None) -> list[str] | None:
    """Comma-separated package files or gs:// URIs, or in Python a list of them."""
    if value is None or isinstance(value, str):
        return flags.parse_packages(value)
    if isinstance(value, (tuple, list)) and all(isinstance(item, str) for item in value):
        return list(value)
    _refuse(flag, value, "a list of packages", f"{flag} dist/a.tar.gz,gs://b/c.whl (in Python also a list)", out)
    return None


# One parser per kind. A --kms-key is completed from its parts once every value is parsed.
PARSERS: dict[Kind, Parser] = {
    Kind.TEXT: _text,
    Kind.GS_DIR: _text,
    Kind.KMS_KEY: _text,
    Kind.KMS_PART: _text,
    Kind.PATH: _path,
    Kind.COUNT: _count,
    Kind.SCALE_TIER: _scale_tier,
    Kind.ACCELERATOR: _accelerator,
    Kind.BOOL_WORD: _bool_word,
    Kind.SWITCH: _switch,
    Kind.LABELS: _labels,
    Kind.PACKAGES: _packages,
}
