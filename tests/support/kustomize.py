"""A small, offline kustomize renderer: exactly the features deploy/k8s uses, no more.

Why not the real one: kustomize is a Go program. PyPI has no package that renders kustomizations
on Python 3.11 (``pykustomize`` needs 3.14, ``kustomize`` on PyPI is an unrelated DSL), Debian
stable packages no kubectl, and the kubectl/kustomize binaries come from hosts CI may not reach.
So the manifest tests render with this module, and, where a ``kubectl`` is installed, check that
``kubectl kustomize`` renders the same objects (tests/deploy/test_k8s_manifests.py), which keeps
this renderer honest.

Supported (kustomize v5 semantics): ``resources`` (files and directories), ``components``
(``kind: Component``), ``namespace``, ``labels`` (``includeSelectors``/``includeTemplates``),
``configMapGenerator`` (``files``, ``literals``, ``behavior`` create/merge/replace, the content
hash suffix and the rewriting of references to the generated names), ``generatorOptions.
disableNameSuffixHash``, ``images``, ``replicas`` and ``patches`` given as inline JSON 6902
operations with a ``target`` (kind, name). Anything else raises ``Unsupported`` rather than
being silently ignored.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]

KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KNOWN_KEYS = {"apiVersion", "kind", "namespace", "labels", "resources", "components", "configMapGenerator",
              "generatorOptions", "images", "replicas", "patches"}
# Kinds that are not namespaced (among those kustomize knows; enough for these manifests).
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "PersistentVolume", "StorageClass", "PriorityClass", "ValidatingWebhookConfiguration",
                  "MutatingWebhookConfiguration", "APIService"}
# Kinds whose spec.template is a pod template (labels' includeTemplates, images).
POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"}
REPLICA_KINDS = {"Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"}


class Unsupported(ValueError):
    """The kustomization uses a feature this renderer does not implement."""


def _load_yaml_docs(path: Path) -> list[Obj]:
    with path.open(encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc is not None]


def _kustomization_file(directory: Path) -> Path:
    for name in KUSTOMIZATION_NAMES:
        if (directory / name).is_file():
            return directory / name
    raise FileNotFoundError(f"no kustomization file in {directory}")


# -- ConfigMap name hash (kustomize api/hasher) --------------------------------------------------


def _go_json(value: Any) -> str:
    """encoding/json.Marshal: sorted map keys, no spaces, HTML characters escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def config_map_hash(name: str, data: dict[str, str]) -> str:
    """A 10-character content hash in kustomize's alphabet, appended to a generated ConfigMap's
    name. It follows kustomize's hasher (sha256 of the JSON of kind, name and data, 10 hex digits,
    0/1/3/a/e swapped for letters) but does not reproduce kubectl's suffixes byte for byte, so the
    comparison with ``kubectl kustomize`` ignores the suffix; what matters is that it changes
    with the content and that every reference uses it."""
    encoded = _go_json({"kind": "ConfigMap", "name": name, "data": data})
    digest = hashlib.sha256(encoded.encode("utf-8")).hexdigest()[:10]
    return digest.translate(str.maketrans({"0": "g", "1": "h", "3": "k", "a": "m", "e": "t"}))


# -- JSON 6902 -----------------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise Unsupported(f"JSON pointer {path!r} must start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def apply_json6902(doc: Obj, ops: list[Obj]) -> None:
    for op in ops:
        kind = op["op"]
        parts = _pointer(op["path"])
        parent = _walk(doc, parts[:-1])
        last = parts[-1]
        if kind in ("add", "replace"):
            value = copy.deepcopy(op["value"])
            if isinstance(parent, list):
                if last == "-":
                    parent.append(value)
                elif kind == "add":
                    parent.insert(int(last), value)
                else:
                    parent[int(last)] = value
            else:
                if kind == "replace" and last not in parent:
                    raise KeyError(f"replace: {op['path']} does not exist")
                parent[last] = value
        elif kind == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        else:
            raise Unsupported(f"JSON 6902 op {kind!r}")


# -- the renderer --------------------------------------------------------------------------------


class _Build:
    def __init__(self) -> None:
        self.objects: list[Obj] = []
        # generated ConfigMap: original name -> final name (with hash)
        self.renames: dict[str, str] = {}

    def find(self, kind: str, name: str) -> Obj | None:
        for obj in self.objects:
            if obj["kind"] == kind and obj["metadata"]["name"] == name:
                return obj
        return None


def _read_kustomization(directory: Path) -> Obj:
    (doc,) = _load_yaml_docs(_kustomization_file(directory))
    unknown = set(doc) - KNOWN_KEYS
    if unknown:
        raise Unsupported(f"{directory}: kustomization keys {sorted(unknown)}")
    return doc


def _generate_config_maps(directory: Path, kust: Obj, build: _Build) -> None:
    options = kust.get("generatorOptions") or {}
    if set(options) - {"disableNameSuffixHash"}:
        raise Unsupported(f"generatorOptions {sorted(options)}")
    for gen in kust.get("configMapGenerator") or []:
        if set(gen) - {"name", "files", "literals", "behavior"}:
            raise Unsupported(f"configMapGenerator keys {sorted(gen)}")
        data: dict[str, str] = {}
        for entry in gen.get("files") or []:
            key, _, source = entry.rpartition("=")
            data[key or Path(source).name] = (directory / source).read_text(encoding="utf-8")
        for literal in gen.get("literals") or []:
            key, _, value = literal.partition("=")
            data[key] = value
        behavior = gen.get("behavior", "create")
        name = gen["name"]
        existing = next((o for o in build.objects if o["kind"] == "ConfigMap"
                         and o["metadata"].get("annotations", {}).get("orbitmq.test/generated-name") == name), None)
        if behavior == "create":
            if existing is not None:
                raise ValueError(f"configMapGenerator {name}: already generated (use behavior merge/replace)")
            build.objects.append({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": name,
                                               "annotations": {"orbitmq.test/generated-name": name,
                                                               "orbitmq.test/hash": str(
                                                                   not options.get("disableNameSuffixHash"))}},
                                  "data": data})
        elif behavior in ("merge", "replace"):
            if existing is None:
                raise ValueError(f"configMapGenerator {name}: nothing to {behavior}")
            existing["data"] = {**existing["data"], **data} if behavior == "merge" else data
        else:
            raise Unsupported(f"configMapGenerator behavior {behavior!r}")


def _apply_transformers(kust: Obj, build: _Build) -> None:
    """This level's namespace, labels, images, replicas and patches, on everything built so far."""
    for patch in kust.get("patches") or []:
        if set(patch) - {"target", "patch"} or set(patch.get("target", {})) - {"kind", "name"}:
            raise Unsupported(f"patch form {sorted(patch)} (only inline JSON 6902 with target kind/name)")
        target = patch["target"]
        matched = [o for o in build.objects if o["kind"] == target["kind"]
                   and o["metadata"]["name"] == target["name"]]
        if not matched:
            raise ValueError(f"patch target {target} matches nothing")
        ops = yaml.safe_load(patch["patch"])
        if not isinstance(ops, list):
            raise Unsupported("strategic-merge patches (only JSON 6902 operation lists)")
        for obj in matched:
            apply_json6902(obj, ops)
    for rep in kust.get("replicas") or []:
        matched = [o for o in build.objects if o["kind"] in REPLICA_KINDS and o["metadata"]["name"] == rep["name"]]
        if not matched:
            raise ValueError(f"replicas: no workload named {rep['name']}")
        for obj in matched:
            obj["spec"]["replicas"] = rep["count"]
    for image in kust.get("images") or []:
        for obj in build.objects:
            if obj["kind"] not in POD_TEMPLATE_KINDS:
                continue
            spec = obj["spec"]["template"]["spec"]
            for container in spec.get("initContainers", []) + spec.get("containers", []):
                ref = container["image"]
                base = ref.split("@")[0].rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
                if base != image["name"]:
                    continue
                new = image.get("newName", base)
                if "digest" in image:
                    new += "@" + image["digest"]
                elif "newTag" in image:
                    new += ":" + str(image["newTag"])
                container["image"] = new
    for entry in kust.get("labels") or []:
        if entry.get("includeSelectors"):
            raise Unsupported("labels with includeSelectors: true")
        pairs = entry["pairs"]
        for obj in build.objects:
            obj["metadata"].setdefault("labels", {}).update(pairs)
            if entry.get("includeTemplates") and obj["kind"] in POD_TEMPLATE_KINDS:
                obj["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {}).update(pairs)
                for claim in obj["spec"].get("volumeClaimTemplates", []):
                    claim.setdefault("metadata", {}).setdefault("labels", {}).update(pairs)
    namespace = kust.get("namespace")
    if namespace:
        for obj in build.objects:
            if obj["kind"] not in CLUSTER_SCOPED:
                obj["metadata"]["namespace"] = namespace


def _build(directory: Path, *, component: bool = False) -> _Build:
    kust = _read_kustomization(directory)
    expected = "Component" if component else "Kustomization"
    if kust.get("kind", "Kustomization") != expected:
        raise ValueError(f"{directory}: kind {kust.get('kind')}, expected {expected}")
    build = _Build()
    _add_resources(directory, kust, build)
    for comp in kust.get("components") or []:
        _apply_component(directory / comp, build)
    _generate_config_maps(directory, kust, build)
    _apply_transformers(kust, build)
    return build


def _add_resources(directory: Path, kust: Obj, build: _Build) -> None:
    for res in kust.get("resources") or []:
        path = directory / res
        if path.is_dir():
            sub = _build(path)
            build.objects.extend(sub.objects)
        else:
            build.objects.extend(_load_yaml_docs(path))


def _apply_component(directory: Path, build: _Build) -> None:
    kust = _read_kustomization(directory)
    if kust.get("kind") != "Component":
        raise ValueError(f"{directory} is not a kind: Component")
    _add_resources(directory, kust, build)
    _generate_config_maps(directory, kust, build)
    _apply_transformers(kust, build)


def _finish(build: _Build) -> list[Obj]:
    """Give generated ConfigMaps their final (hashed) names and rewrite references to them."""
    renames: dict[str, str] = {}
    for obj in build.objects:
        annotations = obj["metadata"].get("annotations", {})
        name = annotations.pop("orbitmq.test/generated-name", None)
        if name is None:
            continue
        hashed = annotations.pop("orbitmq.test/hash") == "True"
        if not annotations:
            del obj["metadata"]["annotations"]
        final = f"{name}-{config_map_hash(name, obj['data'])}" if hashed else name
        obj["metadata"]["name"] = final
        renames[name] = final
    for obj in build.objects:
        if obj["kind"] not in POD_TEMPLATE_KINDS:
            continue
        spec = obj["spec"]["template"]["spec"]
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                volume["configMap"]["name"] = renames.get(volume["configMap"]["name"], volume["configMap"]["name"])
            for source in volume.get("projected", {}).get("sources", []):
                if "configMap" in source:
                    source["configMap"]["name"] = renames.get(source["configMap"]["name"],
                                                              source["configMap"]["name"])
        for container in spec.get("initContainers", []) + spec.get("containers", []):
            for env_from in container.get("envFrom", []):
                ref = env_from.get("configMapRef")
                if ref:
                    ref["name"] = renames.get(ref["name"], ref["name"])
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("configMapKeyRef")
                if ref:
                    ref["name"] = renames.get(ref["name"], ref["name"])
    return build.objects


def render(directory: Path | str) -> list[Obj]:
    """The objects ``kustomize build directory`` would print (in no particular order)."""
    return _finish(_build(Path(directory)))


def object_key(obj: Obj) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
