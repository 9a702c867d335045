"""JSON replies in ASCII: any text that echoes a client's input (an error message naming a bad
value) stays encodable, even a lone surrogate sent as "\\ud800"."""

from rest_framework.renderers import JSONRenderer


class AsciiJSONRenderer(JSONRenderer):
    ensure_ascii = True
