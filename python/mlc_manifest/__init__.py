"""mlc_manifest: the MLC model artifact manifest (documents, ids, binding, check, media
frontends, tokenizer, prompts, prefill plans and generation sessions) for Python.

Documents go in as dicts (or JSON text, or a path) and come out as dicts. Failures raise
mlc_manifest.Error, whose ``errors`` lists {"code", "document", "path", "message"}.
"""


class Error(Exception):
    """A failure of the library: ``errors`` is the list of {code, document, path, message}."""

    def __init__(self, message, errors=()):
        super().__init__(message)
        self.errors = list(errors)


from ._core import (  # noqa: E402  (Error must exist before the module raises it)
    CheckReport,
    Session,
    Tokenizer,
    __version__,
    bind,
    check,
    decode_audio,
    decode_image,
    emit,
    emit_package,
    interface_id,
    parameter_schema_id,
    plan,
    prompt,
    read_package,
    read_program,
    validate_package,
    validate_program,
)

__all__ = [
    "Error", "CheckReport", "Session", "Tokenizer", "__version__", "bind", "check",
    "decode_audio", "decode_image", "emit", "emit_package", "interface_id",
    "parameter_schema_id", "plan", "prompt", "read_package", "read_program",
    "validate_package", "validate_program",
]
