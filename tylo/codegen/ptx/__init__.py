"""Inline-PTX templates, one module per hardware feature (same names as ``tylo.lang``)."""
