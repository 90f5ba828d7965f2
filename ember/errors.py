"""The error types ember raises for bad input; every user-facing failure is an EmberError."""


class EmberError(Exception):
    """Base class of every error ember raises on purpose."""


class DTypeError(EmberError, TypeError):
    """A value has the wrong or an unknown data type."""


class ShapeError(EmberError, ValueError):
    """A shape does not match what an operation requires."""


class ScheduleError(EmberError):
    """A schedule primitive was applied where it is not legal."""


class LoweringError(EmberError):
    """A schedule could not be turned into a loop program."""


class TargetError(EmberError, ValueError):
    """A target string names an unknown kind, triple or option."""


class CodegenError(EmberError):
    """The code generator cannot translate some construct."""


class ArgumentError(EmberError, ValueError):
    """A compiled function was called with arguments that do not match its parameters."""


class UnsupportedOpError(EmberError):
    """A model uses an operator or attribute ember does not support."""


class VerifyError(EmberError):
    """A loop program is malformed: a pass or a front end produced invalid IR."""


class ModelError(EmberError, ValueError):
    """A model file is malformed or inconsistent (fails the checker, names undefined values)."""


class InternalError(EmberError):
    """ember failed on input it accepted: a compiler bug, reported with where it happened."""


class CorruptFileError(EmberError, ValueError):
    """A file ember wrote (kernel cache entry, exported library) is damaged or is not what
    it claims to be; it is refused before any of its code runs."""


class TuningError(EmberError):
    """The tuning database or a tuning run cannot go on (corrupt file, bad record, bad task)."""
