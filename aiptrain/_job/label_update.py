"""`jobs update`'s label arithmetic: --update-labels, --remove-labels and --clear-labels applied to
a job's current labels, as gcloud's label flags apply them (clear or remove first, then update)."""

from __future__ import annotations

from dataclasses import dataclass

from aiptrain.errors import ProblemList


@dataclass(frozen=True)
class LabelChange:
    update: dict[str, str]
    remove: frozenset[str]
    clear: bool

    @property
    def asked(self) -> bool:
        return bool(self.update or self.remove or self.clear)

    def applied_to(self, current: dict[str, str] | None) -> dict[str, str]:
        labels = {} if self.clear else {k: v for k, v in (current or {}).items() if k not in self.remove}
        labels.update(self.update)
        return labels


def label_change(update: dict[str, str] | None, remove: tuple[str, ...], clear: bool,
                 problems: ProblemList) -> LabelChange:
    """The change the three flags ask for; contradictions go to `problems` (naming the flag)."""
    keys = frozenset(key.strip() for value in remove for key in value.split(",") if key.strip())
    if clear and keys:
        problems.add("--remove-labels", "cannot be combined with --clear-labels",
                     "--clear-labels removes every label already; pass one of the two")
    both = sorted(keys & set(update or {}))
    if both:
        problems.add("--remove-labels", f"label(s) {', '.join(both)} both updated and removed",
                     "name each key in --update-labels or in --remove-labels, not both")
    return LabelChange(dict(update or {}), keys, clear)
