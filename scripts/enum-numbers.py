#!/usr/bin/env python3
"""Writes the proto numbers of the enum fields of a trimmed aiplatform v1
discovery document, for proto3's JSON mapping of enums as numbers (what
`$alt=json;enum-encoding=int` asks for, as @google-cloud/aiplatform's REST
mode sends and reads them).

    scripts/enum-numbers.py api/aiplatform.v1.json PROTOS_JSON api/aiplatform.v1.enums.json

PROTOS_JSON: the protobufjs descriptor that ships in the npm package
@google-cloud/aiplatform (build/protos/protos.json; tests/vertex_client
pins the version). A discovery schema GoogleCloudAiplatformV1StudySpecMetricSpec
is the message google.cloud.aiplatform.v1.StudySpec.MetricSpec; each of its
properties with an `enum` list is looked up as that message's field, whose
enum type gives the numbers. Writes
{"SCHEMA": {"property": {"ENUM_NAME": number, ...}, ...}, ...}.
"""
import json
import re
import sys

PREFIX = "GoogleCloudAiplatformV1"
PACKAGE = ["google", "cloud", "aiplatform", "v1"]


def camel_parts(name):
    return re.findall(r"[A-Z][a-z0-9]*", name)


def find_message(root, schema):
    """The message (and its path of names) a discovery schema name is: the
    longest nested names that exist, left to right."""
    node = root
    for p in PACKAGE:
        node = node["nested"][p]
    parts = camel_parts(schema[len(PREFIX):])
    path = []
    while parts:
        for n in range(len(parts), 0, -1):
            name = "".join(parts[:n])
            if name in node.get("nested", {}):
                node = node["nested"][name]
                path.append((name, node))
                parts = parts[n:]
                break
        else:
            return None, None
    return node, path


def resolve_enum(root, path, type_name):
    """An enum type as a field names it: relative to its message, then up."""
    if type_name.startswith("google.cloud.aiplatform.v1."):
        type_name = type_name[len("google.cloud.aiplatform.v1."):]
    scopes = [n for _, n in path][::-1]
    pkg = root
    for p in PACKAGE:
        pkg = pkg["nested"][p]
    for scope in scopes + [pkg]:
        node = scope
        for part in type_name.split("."):
            node = node.get("nested", {}).get(part)
            if node is None:
                break
        if node is not None and "values" in node:
            return node["values"]
    return None


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    doc = json.load(open(sys.argv[1]))
    root = json.load(open(sys.argv[2]))
    out = {}
    for schema, body in sorted(doc["schemas"].items()):
        enum_props = {k: v for k, v in body.get("properties", {}).items() if "enum" in v}
        if not enum_props or not schema.startswith(PREFIX):
            continue
        message, path = find_message(root, schema)
        if message is None:
            sys.exit(f"enum-numbers: no message for schema {schema}")
        for prop, spec in sorted(enum_props.items()):
            field = message.get("fields", {}).get(prop)
            if field is None:
                sys.exit(f"enum-numbers: {schema}.{prop} is not a field of its message")
            values = resolve_enum(root, path, field["type"])
            if values is None:
                sys.exit(f"enum-numbers: {schema}.{prop}: no enum {field['type']}")
            missing = [n for n in spec["enum"] if n not in values]
            if missing:
                sys.exit(f"enum-numbers: {schema}.{prop}: {missing} have no number in the protos")
            out.setdefault(schema, {})[prop] = {n: values[n] for n in spec["enum"]}
    with open(sys.argv[3], "w") as f:
        json.dump(out, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
