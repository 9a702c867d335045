"""Print, as JSON, ninja's per-output build seconds for every entry of build caches (the figures of
"where a load_inline build's time goes"): python benchmarks/gpu/ninja_steps.py CACHE_DIR..."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from evaluation.builds.stage import ninja_steps  # noqa: E402


def main() -> None:
    out = {}
    for cache in sys.argv[1:]:
        for name in sorted(os.listdir(cache)) if os.path.isdir(cache) else []:
            entry = os.path.join(cache, name)
            if not name.startswith(".") and os.path.isdir(entry):
                steps = ninja_steps(entry)
                if steps:
                    out[f"{os.path.basename(cache.rstrip('/'))}/{name}"] = steps
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
