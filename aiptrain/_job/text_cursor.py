"""A cursor over a one-line expression (a --filter, a --format), shared by their parsers, with
gcloud's way of showing where the text went wrong: `... *HERE* ...`."""

from __future__ import annotations

from aiptrain.errors import UsageError


class TextCursor:
    def __init__(self, text: str, source: str, hint: str) -> None:
        self.text = text
        self.source = source  # the flag or field the text came from, as error messages name it
        self.hint = hint
        self.position = 0

    def fail(self, message: str) -> UsageError:
        shown = f"{self.text[:self.position]} *HERE* {self.text[self.position:]}".strip()
        return UsageError(f"{self.source}: {message} [{shown}]", hint=self.hint)

    def skip_space(self) -> None:
        while self.position < len(self.text) and self.text[self.position].isspace():
            self.position += 1

    def peek(self, length: int = 1) -> str:
        """The next `length` characters after any space ("" at the end)."""
        self.skip_space()
        return self.text[self.position:self.position + length]

    def accept(self, literal: str) -> bool:
        """Step over `literal` if it comes next."""
        if self.peek(len(literal)) == literal:
            self.position += len(literal)
            return True
        return False
