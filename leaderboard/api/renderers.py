"""JSON replies in ASCII: any text that echoes a client's input (an error message naming a bad
value) stays encodable, even a lone surrogate sent as "\\ud800"."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rest_framework.renderers import JSONRenderer


@dataclass(frozen=True)
class RenderedJSON:
    """Data rendered once, as AsciiJSONRenderer renders it without indent: what a kept board holds
    (leaderboard/reads/board/served.py), so that a request sends its bytes rather than unpickling the
    data and rendering it again (about 4 of a 13 ms reply of the API's board, profiled)."""

    content: bytes

    @classmethod
    def of(cls, data: Any) -> RenderedJSON:
        return cls(AsciiJSONRenderer().render(data))


class AsciiJSONRenderer(JSONRenderer):
    ensure_ascii = True

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, RenderedJSON):
            if self.get_indent(accepted_media_type, renderer_context or {}) is None:
                return data.content
            data = json.loads(data.content)  # indented (the browsable API, `; indent=`): rendered again
        return super().render(data, accepted_media_type, renderer_context)
