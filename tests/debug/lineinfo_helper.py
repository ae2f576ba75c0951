"""A helper in its own file: its inlined instructions carry this file's lines."""
import tylo


@tylo.func
def scaled(v, s):
    return v * s  # LINE:helper
