"""Generate schemas/releases/<X.Y>.json: the API keys and version ranges a Kafka release's brokers
advertised in ApiVersions, from Kafka's own message definitions at the release's git tag.

    python schemas/releases/generate.py <kafka git dir> [--out schemas/releases]

Facts read, per release:
- 2.2 and later: clients/src/main/resources/common/message/*Request.json — `apiKey`,
  `validVersions`, `latestVersionUnstable` (an unstable last version is not advertised unless
  unstable.api.versions.enable, which a release's brokers default to false) and `listeners` (2.8+:
  the listener types that serve the API; a 2.x/3.x broker is a zkBroker, 4.x has only KRaft
  brokers, and an API only the controller serves is not advertised by brokers).
- 2.2 to 2.7 have no `listeners`: the broker advertised every ApiKeys entry that is enabled
  (clients/.../protocol/ApiKeys.java: `isEnabled`).
- 2.1 has no JSON definitions (they begin in 2.2): ApiKeys.java names each request class, whose
  `schemaVersions()` lists one Schema per version, all from v0.
- A release whose tag the git dir lacks (a mirror older than the release) falls back to
  kafka-python's BROKER_API_VERSIONS (kafka/protocol/broker_version_data.py: ApiVersions responses
  recorded from real brokers of each release); the file says so in "source".
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import subprocess
import sys

# release → git refs to try, first that exists (3.9.0's tag is missing from some mirrors; the 3.9
# branch carries the same definitions).
RELEASES = {f"{m}.{n}": [f"{m}.{n}.0"] for m, n in
            [(2, 1), (2, 2), (2, 3), (2, 4), (2, 5), (2, 6), (2, 7), (2, 8), (3, 0), (3, 1),
             (3, 2), (3, 3), (3, 4), (3, 5), (3, 6), (3, 7), (3, 8), (3, 9), (4, 0), (4, 1)]}
RELEASES["3.9"].append("3.9")
MESSAGES = "clients/src/main/resources/common/message"
JAVA = "clients/src/main/java/org/apache/kafka/common"


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", gitdir, *args], check=True, capture_output=True,
                          text=True).stdout


def ref_exists(gitdir: str, ref: str) -> bool:
    return subprocess.run(["git", "-C", gitdir, "rev-parse", "--verify", "-q", ref + "^{commit}"],
                          capture_output=True).returncode == 0


def has_file(gitdir: str, spec: str) -> bool:
    return subprocess.run(["git", "-C", gitdir, "cat-file", "-e", spec],
                          capture_output=True).returncode == 0


def header_fields(text: str) -> dict:
    """The top-level facts of a message definition. Read field by field, not as JSON: the files
    are JSON with // comments, some of them after a value on the same line."""
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    spec: dict = {}
    for field in ("type", "name", "validVersions"):
        m = re.search(rf'"{field}"\s*:\s*"([^"]*)"', text)
        spec[field] = m.group(1) if m else None
    spec["apiKey"] = int(re.search(r'"apiKey"\s*:\s*(\d+)', text).group(1))
    m = re.search(r'"latestVersionUnstable"\s*:\s*(true|false)', text)
    spec["latestVersionUnstable"] = bool(m) and m.group(1) == "true"
    m = re.search(r'"listeners"\s*:\s*\[([^\]]*)\]', text)
    if m:
        spec["listeners"] = re.findall(r'"(\w+)"', m.group(1))
    return spec


def version_range(spec: str) -> tuple[int, int | None]:
    lo, _, hi = spec.partition("-")
    if spec.endswith("+"):
        return int(spec[:-1]), None
    return int(lo), int(hi) if hi else int(lo)


def api_keys_java(gitdir: str, ref: str) -> dict[int, dict]:
    """ApiKeys.java's entries: {key: {name, enabled, request class (2.1)}}."""
    text = git(gitdir, "show", f"{ref}:{JAVA}/protocol/ApiKeys.java")
    out = {}
    for m in re.finditer(r'\b[A-Z_]+\((\d+), "(\w+)",([^()]*?)(?:(\w+)\.schemaVersions\(\)|\w+\.SCHEMAS)',
                         " ".join(text.split())):
        flags = re.findall(r"\b(?:true|false)\b", m.group(3))
        enabled = not (len(flags) == 2 and flags[1] == "false")     # (clusterAction, isEnabled)
        out[int(m.group(1))] = {"name": m.group(2), "enabled": enabled, "class": m.group(4)}
    return out


def schema_count(gitdir: str, ref: str, cls: str) -> int:
    text = git(gitdir, "show", f"{ref}:{JAVA}/requests/{cls}.java")
    body = re.search(r"Schema\[\] schemaVersions\(\)\s*\{\s*return new Schema\[\]\s*\{([^}]*)\}",
                     text)
    assert body, f"{ref}: no schemaVersions() in {cls}"
    return len([s for s in body.group(1).split(",") if s.strip()])


def from_java(gitdir: str, ref: str) -> dict[int, dict]:
    apis = {}
    for key, e in sorted(api_keys_java(gitdir, ref).items()):
        if e["enabled"]:
            assert e["class"], f"{ref}: no request class for key {key}"
            apis[key] = {"name": e["name"], "min": 0,
                         "max": schema_count(gitdir, ref, e["class"]) - 1}
    return apis


def from_json(gitdir: str, ref: str, listener: str) -> dict[int, dict]:
    names = git(gitdir, "ls-tree", "--name-only", f"{ref}:{MESSAGES}").split()
    keys = None
    apis = {}
    for name in sorted(n for n in names if n.endswith("Request.json")):
        spec = header_fields(git(gitdir, "show", f"{ref}:{MESSAGES}/{name}"))
        if spec.get("type") != "request":
            continue
        key = spec["apiKey"]
        if "listeners" in spec:
            if listener not in spec["listeners"]:
                continue
        else:
            keys = keys if keys is not None else api_keys_java(gitdir, ref)
            if key not in keys or not keys[key]["enabled"]:
                continue
        lo, hi = version_range(spec["validVersions"])
        assert hi is not None, (ref, name)
        if spec.get("latestVersionUnstable"):
            hi -= 1
        if hi < lo:
            continue            # only an unstable version: not advertised
        apis[key] = {"name": spec["name"].removesuffix("Request"), "min": lo, "max": hi}
    return apis


def from_kafka_python(release: str) -> dict[int, dict]:
    from kafka.protocol.api_key import ApiKey
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
    table = BROKER_API_VERSIONS[tuple(int(p) for p in release.split("."))]
    return {k: {"name": ApiKey(k).name, "min": lo, "max": hi} for k, (lo, hi) in sorted(table.items())}


def generate(gitdir: str, release: str) -> dict:
    listener = "broker" if int(release.split(".")[0]) >= 4 else "zkBroker"
    ref = next((r for r in RELEASES[release] if ref_exists(gitdir, r)), None)
    if ref is None:
        import kafka
        source = (f"kafka-python {kafka.__version__} BROKER_API_VERSIONS: ApiVersions recorded "
                  f"from a {release} broker (tag {RELEASES[release][0]} not in the git dir)")
        apis = from_kafka_python(release)
    elif has_file(gitdir, f"{ref}:{MESSAGES}/ProduceRequest.json"):
        source = f"apache/kafka {ref}: {MESSAGES}/*Request.json"
        apis = from_json(gitdir, ref, listener)
    else:
        source = (f"apache/kafka {ref}: {JAVA}/protocol/ApiKeys.java and each request's "
                  "schemaVersions() (no JSON definitions before 2.2)")
        apis = from_java(gitdir, ref)
    return {"release": release, "source": source, "listener": listener,
            "apis": {str(k): v for k, v in sorted(apis.items())}}


def librdkafka_features(gitdir: str) -> list[dict]:
    """librdkafka's feature map (src/rdkafka_feature.c): each feature, the broker release its
    comment dates it to ("@brief >=0.11.0: ..."; None when undated) and the API version ranges it
    depends on (enabled when every range overlaps the broker's)."""
    header = git(gitdir, "show", "HEAD:src/rdkafka_protocol.h")
    keys = {m.group(1): int(m.group(2))
            for m in re.finditer(r"#define RD_KAFKAP_(\w+)\s+(\d+)\s*$", header, re.M)}
    source = git(gitdir, "show", "HEAD:src/rdkafka_feature.c")
    table = source[source.index("rd_kafka_feature_map[] = {"):source.index("/* sentinel */")]
    out = []
    for m in re.finditer(r"/\*\s*@brief\s*(?:>=\s*([\d.]+))?[^*]*(?:\*(?!/)[^*]*)*\*/\s*"
                         r"\.feature = RD_KAFKA_FEATURE_(\w+),\s*\.depends\s*=\s*\{(.*?)\{-1\}",
                         table, re.S):
        since = [int(x) for x in m.group(1).strip(".").split(".")] if m.group(1) else None
        depends = [[keys[name], int(lo), 32767 if hi == "RD_KAFKAP_RPC_VERSION_MAX" else int(hi)]
                   for name, lo, hi in re.findall(r"\{RD_KAFKAP_(\w+),\s*(\d+),\s*(\w+)\}",
                                                  m.group(3))]
        out.append({"feature": m.group(2), "since": since, "depends": depends})
    return out


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("gitdir")
    p.add_argument("--out", default=str(pathlib.Path(__file__).parent))
    p.add_argument("--librdkafka", metavar="GITDIR",
                   help="also extract librdkafka's feature map (the tests' cross-check) from "
                        "this confluentinc/librdkafka git dir")
    args = p.parse_args(argv)
    if args.librdkafka:
        path = pathlib.Path(args.out) / "librdkafka-features.json"
        features = librdkafka_features(args.librdkafka)
        path.write_text(json.dumps(features, indent=1) + "\n")
        print(f"{path}: {len(features)} features")
    for release in RELEASES:
        table = generate(args.gitdir, release)
        path = pathlib.Path(args.out) / f"{release}.json"
        path.write_text(json.dumps(table, indent=1) + "\n")
        print(f"{path}: {len(table['apis'])} APIs, {table['source']}")


if __name__ == "__main__":
    main(sys.argv[1:])
