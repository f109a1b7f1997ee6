#!/usr/bin/env python3
"""Writes the part of a Google discovery document that mlengine serves.

    scripts/trim-discovery.py FULL.json OUT.json RESOURCE_PATH...

Keeps the document's top level (name, version, revision, rootUrl,
parameters, auth...), the resources named by dotted paths below
`resources` (e.g. projects.locations.customJobs, with what is below them),
and every schema their methods reference, directly or through other
schemas. mlengine's api/aiplatform.v1.json was made from Google's published
aiplatform v1 document (its `revision` field says which) with:

    scripts/trim-discovery.py aiplatform.v1.json api/aiplatform.v1.json \\
        projects.locations.customJobs projects.locations.hyperparameterTuningJobs \\
        projects.locations.operations
"""
import json
import sys


def refs(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out.add(v)
            else:
                refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    full = json.load(open(sys.argv[1]))
    out = {k: v for k, v in full.items() if k not in ("resources", "schemas")}
    out["resources"] = {}
    wanted = set()
    for path in sys.argv[3:]:
        src, dst = full, out
        parts = path.split(".")
        for i, part in enumerate(parts):
            src = src["resources"][part]
            if i == len(parts) - 1:
                dst.setdefault("resources", {})[part] = src
            else:
                node = dst.setdefault("resources", {}).setdefault(part, {})
                dst = node
        refs(src, wanted)
    schemas, todo = {}, list(wanted)
    while todo:
        name = todo.pop()
        if name in schemas:
            continue
        schemas[name] = full["schemas"][name]
        more = set()
        refs(schemas[name], more)
        todo += [m for m in more if m not in schemas]
    out["schemas"] = dict(sorted(schemas.items()))
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, indent=2, sort_keys=False)
        f.write("\n")


if __name__ == "__main__":
    main()
