"""A package that only a runtime's package list provides (the Ray runtime-environment test)."""

MESSAGE = "hello from the runtime's packages"
