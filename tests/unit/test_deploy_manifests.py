"""The deployment manifests (deploy/, docs/deployment.md) checked offline.

- Every Kubernetes manifest validates against the Kubernetes API schemas that kubernetes-validate bundles (no
  network), strictly: an unknown field fails, as `kubectl apply --validate=strict` would.
- The manifests and the compose file wire the cluster interface: the roles, the shared volume, the searchers'
  own volumes, names and addresses, the environment.
- Every command they run is a real `codewell` command, parsed by codewell's own click commands with the exact
  arguments the manifests give (`searcher`, until it lands, against the interface it was promised with); so is
  every `codewell searcher drain` docs/deployment.md tells operators to run.
- No searcher pod drains itself on stop: a restarted searcher keeps its name, volume and share, and a drain there
  would move the whole share away and back on every rolling update.
"""

from __future__ import annotations

import copy
import functools
import re
import shlex
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import click
import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from codewell.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_DIR = ROOT / "deploy" / "kubernetes"
COMPOSE_DIR = ROOT / "deploy" / "compose"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DEPLOYMENT_DOC = ROOT / "docs" / "deployment.md"

# `codewell searcher` on SIGTERM: open requests up to 10 s (cli/serve.py, REQUESTS_GRACE_SECONDS), then running
# jobs up to 10 s (cli/searcher.py, GRACE_SECONDS), then it exits: the pod's grace period must cover both.
SEARCHER_SIGTERM_SECONDS = 10 + 10

# The oldest Kubernetes docs/deployment.md says the manifests run on, and the newest the validator bundles.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")

# The roles' commands (docs/deployment.md): every one must be found in the manifests, and nothing else run. No
# `searcher drain`: an operator runs it by hand before a scale-down, no manifest runs it on a stop.
EXPECTED_COMMANDS = {("db", "upgrade"), ("db", "status"), ("serve",), ("worker",), ("searcher",)}

# `codewell searcher` as the cluster work defines it (issue #29): its options, and `drain`'s one argument. Checked
# by the interface until the command exists, then by click itself (see `check_codewell_command`).
# Each option maps to whether it takes a value (the drain's switches do not).
SEARCHER_INTERFACE: dict[tuple[str, ...], tuple[dict[str, bool], int]] = {
    ("searcher",): (dict.fromkeys(("--host", "--port", "--name", "--advertise", "--concurrency"), True), 0),
    ("searcher", "drain"): ({"--timeout": True, "--wait": False, "--no-wait": False, "--undo": False}, 1),
}

SHARED_CLAIM = "codewell-shared"
DATABASE_SECRET = "codewell-database"
ENV_CONFIGMAP = "codewell-env"
SEARCHER_SERVICE = "codewell-searcher"


# ---------------------------------------------------------------- loading


def load_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def manifest_files() -> list[Path]:
    return sorted(p for p in KUBERNETES_DIR.glob("*.yaml") if p.name != "kustomization.yaml")


@functools.cache
def manifests() -> list[dict[str, Any]]:
    """Every Kubernetes document, parsed once (tests that change one change a deep copy)."""
    return [doc for path in manifest_files() for doc in load_documents(path)]


def find(kind: str, name: str) -> dict[str, Any]:
    found = [m for m in manifests() if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def pod_specs() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, pod template spec) of every Deployment, StatefulSet and Job."""
    for m in manifests():
        if m["kind"] in ("Deployment", "StatefulSet", "Job"):
            yield m, m["spec"]["template"]["spec"]


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def env_configmap() -> dict[str, str]:
    data: dict[str, str] = find("ConfigMap", ENV_CONFIGMAP)["data"]
    return data


def container_env(container: dict[str, Any]) -> dict[str, Any]:
    """The container's environment: its env entries (values or valueFrom) over the ConfigMaps it imports."""
    env: dict[str, Any] = {}
    for source in container.get("envFrom", []):
        env.update(find("ConfigMap", source["configMapRef"]["name"])["data"])
    for entry in container.get("env", []):
        env[entry["name"]] = entry.get("value", entry.get("valueFrom"))
    return env


def validate_manifest(doc: dict[str, Any], kubernetes: str) -> None:
    """Raise unless `doc` is valid for that Kubernetes version (strict: unknown fields are errors; a kind or
    apiVersion the schemas do not know raises SchemaNotFoundError)."""
    kubernetes_validate.validate(doc, kubernetes, strict=True)


# ---------------------------------------------------------------- commands


def script_commands(script: str, env: dict[str, str]) -> list[list[str]]:
    """The `codewell ...` invocations in a shell script, each cut at the first shell operator, `$VAR`s filled in."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    found: list[list[str]] = []
    for i, token in enumerate(tokens):
        if token != "codewell":
            continue
        argv: list[str] = []
        for arg in tokens[i + 1 :]:
            if set(arg) <= set("();<>|&"):
                break
            argv.append(re.sub(r"\$(\w+)", lambda m: env[m.group(1)], arg))
        found.append(argv)
    assert found, f"no codewell command in the script {script!r}"
    return found


def shell_script(command: list[str], where: str) -> str:
    """The script of a `sh -c SCRIPT` command (the only form of command the manifests use)."""
    assert command[:2] == ["sh", "-c"], f"{where}: {command}"
    assert len(command) == 3, f"{where}: {command}"
    return command[2]


def expand_kubernetes_vars(arg: str, values: dict[str, str], where: str) -> str:
    """`$(VAR)` in a container's args as Kubernetes expands it; an undefined VAR would stay literal: an error."""
    for var in re.findall(r"\$\((\w+)\)", arg):
        assert var in values, f"{where}: $({var}) is not in the container's environment"
        arg = arg.replace(f"$({var})", values[var])
    return arg


def kubernetes_commands() -> Iterator[tuple[str, list[str]]]:
    """(where, argv after `codewell`) of every codewell command a Kubernetes container runs."""
    for workload, pod in pod_specs():
        for c in containers(pod):
            where = f"{workload['kind']} {workload['metadata']['name']}, container {c['name']}"
            # What $(VAR) and $VAR stand for when the pod runs: a pod name where the downward API gives one.
            values = {
                name: "codewell-searcher-0" if isinstance(v, dict) and "fieldRef" in v else str(v)
                for name, v in container_env(c).items()
            }
            if "command" in c:
                for argv in script_commands(shell_script(c["command"], where), values):
                    yield where, argv
            else:
                # The image's entrypoint is codewell (test_dockerfile_runs_codewell): args are its arguments.
                yield where, [expand_kubernetes_vars(a, values, where) for a in c["args"]]
            for hook in c.get("lifecycle", {}).values():
                command = hook["exec"]["command"]
                # Kubernetes expands $(VAR) in args, never in exec hooks: those must go through a shell.
                assert "$(" not in " ".join(command), f"{where}: $(VAR) is not expanded in a lifecycle hook"
                for argv in script_commands(shell_script(command, where), values):
                    yield f"{where}, lifecycle hook", argv


def compose_commands() -> Iterator[tuple[str, list[str]]]:
    compose = load_documents(COMPOSE_DIR / "docker-compose.yml")[0]
    for name, service in compose["services"].items():
        if service.get("image") != "codewell:latest":
            continue
        if "entrypoint" in service:
            script = shell_script([*service["entrypoint"], *service["command"]], name)
            for argv in script_commands(script, dict(service["environment"])):
                yield f"compose service {name}", argv
        else:
            yield f"compose service {name}", list(service["command"])


def command_path(argv: list[str]) -> tuple[str, ...]:
    """The sub-command names at the head of argv (`searcher drain NAME` -> ("searcher", "drain"))."""
    path = [argv[0]]
    if argv[0] in ("db", "searcher") and len(argv) > 1 and not argv[1].startswith("-"):
        path.append(argv[1])
    return tuple(path)


def listed_commands(path: tuple[str, ...]) -> set[str]:
    """The sub-commands `codewell <path> --help` lists."""
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    section = result.output.split("Commands:", 1)[1].split("\n\n", 1)[0]
    return {line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.split()}


def parse_with_click(argv: list[str]) -> None:
    """Parse `codewell argv` with codewell's own click commands, without running it: an unknown command or
    option, a missing argument or a value of the wrong type raises a click error."""
    command: click.Command = cli
    parent = click.Context(cli, info_name="codewell")
    rest = list(argv)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        name, *rest = rest
        sub = command.get_command(parent, name)
        assert sub is not None, f"codewell has no command {name!r} ({argv})"
        parent = click.Context(sub, info_name=name, parent=parent)
        command = sub
    command.make_context(parent.info_name, rest, parent=parent.parent)


def check_codewell_command(where: str, argv: list[str], top_level: set[str]) -> None:
    path = command_path(argv)
    assert path[0] in top_level or path[0] == "searcher", f"{where}: `codewell {path[0]}` does not exist"
    if path[0] == "searcher":
        options, arguments = SEARCHER_INTERFACE[path]
        rest = argv[len(path) :]
        used = {a.split("=", 1)[0] for a in rest if a.startswith("--")}
        assert used <= set(options), f"{where}: `codewell {' '.join(path)}` has no option {sorted(used - set(options))}"
        values_taken = sum(1 + options[a] for a in rest if a.startswith("--") and "=" not in a)
        assert len(rest) - values_taken == arguments, f"{where}: `codewell {' '.join(path)}` takes {arguments}"
        if "searcher" not in top_level:
            return  # not landed yet: the interface above is all there is to check against
    if len(path) > 1:
        assert path[1] in listed_commands(path[:1]), f"{where}: `codewell {' '.join(path)}` does not exist"
    try:
        parse_with_click(argv)
    except click.ClickException as exc:
        pytest.fail(f"{where}: `codewell {shlex.join(argv)}` does not parse: {exc.format_message()}")


# ---------------------------------------------------------------- Kubernetes: schemas


@pytest.mark.parametrize("kubernetes", KUBERNETES_VERSIONS)
def test_every_manifest_validates_against_the_kubernetes_schemas(kubernetes: str) -> None:
    docs = manifests()
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "StatefulSet", "Service", "PersistentVolumeClaim", "Job", "ConfigMap"} <= kinds
    for doc in docs:
        validate_manifest(doc, kubernetes)


def test_a_broken_manifest_fails_validation() -> None:
    """The validation can fail: an unknown field anywhere (here deep in a probe, and in a volume claim
    template), a wrong type, an unknown kind."""
    web = find("Deployment", "codewell-web")
    validate_manifest(web, KUBERNETES_VERSIONS[0])

    typo = copy.deepcopy(web)
    typo["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/readyz"
    with pytest.raises(kubernetes_validate.ValidationError, match="paht"):
        validate_manifest(typo, KUBERNETES_VERSIONS[0])

    searchers = copy.deepcopy(find("StatefulSet", "codewell-searcher"))
    searchers["spec"]["volumeClaimTemplates"][0]["spec"]["storageSize"] = "10Gi"
    with pytest.raises(kubernetes_validate.ValidationError, match="storageSize"):
        validate_manifest(searchers, KUBERNETES_VERSIONS[-1])

    wrong_type = copy.deepcopy(web)
    wrong_type["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_manifest(wrong_type, KUBERNETES_VERSIONS[0])

    unknown_kind = copy.deepcopy(web)
    unknown_kind["kind"] = "Deploymnet"
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        validate_manifest(unknown_kind, KUBERNETES_VERSIONS[0])


def test_kustomization_lists_every_manifest_and_names_no_namespace() -> None:
    kustomization = load_documents(KUBERNETES_DIR / "kustomization.yaml")[0]
    assert sorted(kustomization["resources"]) == sorted(p.name for p in manifest_files())
    assert "namespace" not in kustomization
    for doc in manifests():
        assert "namespace" not in doc["metadata"], doc["metadata"]["name"]
    # The image the manifests name is this release's.
    images = {i["name"]: i for i in kustomization["images"]}
    assert images["codewell"]["newTag"] == version("codewell")
    for _, pod in pod_specs():
        for c in containers(pod):
            assert c["image"] == f"codewell:{version('codewell')}", c["name"]


# ---------------------------------------------------------------- Kubernetes: the cluster interface


def port_number(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    named = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    assert port in named, f"container {container['name']} has no port named {port}"
    number: int = named[port]
    return number


def test_every_codewell_pod_has_the_database_the_shared_volume_and_the_cluster_switches() -> None:
    env = env_configmap()
    assert env["CODEWELL_SEARCHERS"] == "database"
    assert env["CODEWELL_SHARED_DIR"] != env["CODEWELL_DATA_DIR"]
    claim = find("PersistentVolumeClaim", SHARED_CLAIM)
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    seen = set()
    for workload, pod in pod_specs():
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        claim_templates = {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates", [])}
        for c in containers(pod):
            where = f"{workload['metadata']['name']}/{c['name']}"
            values = container_env(c)
            assert values["CODEWELL_DATABASE_URL"] == {"secretKeyRef": {"name": DATABASE_SECRET, "key": "url"}}, where
            assert values["CODEWELL_SEARCHERS"] == "database", where
            for mount in c.get("volumeMounts", []):
                assert mount["name"] in volumes or mount["name"] in claim_templates, f"{where}: {mount['name']}"
            if c in pod["containers"]:
                mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
                shared = volumes[mounts[values["CODEWELL_SHARED_DIR"]]]
                assert shared["persistentVolumeClaim"]["claimName"] == SHARED_CLAIM, where
                if workload["kind"] != "Job":
                    assert values["CODEWELL_DATA_DIR"] in mounts, f"{where}: no volume at the data dir"
                    # Python counts the node's cores: the pools are sized by the container's CPU request.
                    assert values["CODEWELL_WORKERS"]["resourceFieldRef"]["resource"] == "requests.cpu", where
                    assert {"cpu", "memory"} <= set(c["resources"]["requests"]), where
                    assert "memory" in c["resources"]["limits"], where
                seen.add(workload["metadata"]["name"])
        for volume in volumes.values():
            if "configMap" in volume:
                find("ConfigMap", volume["configMap"]["name"])
            if "persistentVolumeClaim" in volume:
                find("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
        # Only the migration Job migrates; every other pod waits for it before it starts.
        if workload["kind"] != "Job":
            scripts = [shell_script(c["command"], workload["metadata"]["name"]) for c in pod["initContainers"]]
            waits = [argv for script in scripts for argv in script_commands(script, {})]
            assert ["db", "status"] in waits, workload["metadata"]["name"]
    assert seen == {"codewell-migrate", "codewell-web", "codewell-worker", "codewell-searcher"}


def test_web_deployment_probes_and_service() -> None:
    web = find("Deployment", "codewell-web")
    assert web["spec"]["replicas"] == 2
    pod = web["spec"]["template"]
    assert web["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    assert container["args"][:2] == ["serve", "--no-jobs"]
    assert "--no-migrate" in container["args"]
    port = int(container["args"][container["args"].index("--port") + 1])
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert port_number(container, container[probe]["httpGet"]["port"]) == port, probe
    service = find("Service", "codewell-web")
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert port_number(container, service["spec"]["ports"][0]["targetPort"]) == port


def test_searcher_statefulset_volumes_names_and_service() -> None:
    searchers = find("StatefulSet", "codewell-searcher")
    spec = searchers["spec"]
    assert spec["replicas"] == 3
    assert spec["serviceName"] == SEARCHER_SERVICE
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    (container,) = spec["template"]["spec"]["containers"]
    env = container_env(container)
    # Its data dir is its own persistent volume.
    (template,) = spec["volumeClaimTemplates"]
    assert template["spec"]["accessModes"] == ["ReadWriteOnce"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[env["CODEWELL_DATA_DIR"]] == template["metadata"]["name"]
    # Its name from the downward API, its address under the headless service.
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    args = container["args"]
    option = {args[i]: args[i + 1] for i in range(1, len(args) - 1) if args[i].startswith("--")}
    port = int(option["--port"])
    assert args[0] == "searcher"
    assert option["--name"] == "$(POD_NAME)"
    assert option["--advertise"] == f"http://$(POD_NAME).{SEARCHER_SERVICE}:{port}"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["path"] == "/.internal/healthz", probe
        assert port_number(container, container[probe]["httpGet"]["port"]) == port, probe
    # The headless service: one DNS name per pod, resolving whenever the pod runs (membership is the database's
    # row, not readiness: a restarted searcher answers for its share before its readiness probe passes).
    service = find("Service", SEARCHER_SERVICE)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"].items() <= labels.items()
    assert port_number(container, service["spec"]["ports"][0]["targetPort"]) == port


def stop_drains(container: dict[str, Any]) -> list[list[str]]:
    """The `codewell searcher drain` commands a container's exec hooks run, in a shell script or called directly
    (`codewell` by any path); each as its first two words after `codewell`."""
    found: list[list[str]] = []
    for hook in container.get("lifecycle", {}).values():
        command = hook.get("exec", {}).get("command", [])
        script = command[2] if command[:2] == ["sh", "-c"] and len(command) == 3 else shlex.join(command)
        lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
        found.extend(tokens[i + 1 : i + 3] for i, token in enumerate(tokens) if token.split("/")[-1] == "codewell")
    return [argv for argv in found if argv == ["searcher", "drain"]]


def test_a_searcher_is_not_drained_when_its_pod_stops() -> None:
    """A rolling update or a node drain restarts a searcher under the same name with the same volume: it holds
    its shards and owns the same share (rendezvous hashing over names). A preStop drain would move its whole share
    to the others and back on every restart; only the scale-down procedure drains, by hand, first."""
    searchers = find("StatefulSet", "codewell-searcher")
    pod = searchers["spec"]["template"]["spec"]
    for c in containers(pod):
        assert "lifecycle" not in c, f"searcher container {c['name']} has lifecycle hooks: {c['lifecycle']}"
        assert not stop_drains(c)
    # The grace period covers `codewell searcher`'s own SIGTERM handling, and no more than a short stop needs.
    grace = pod["terminationGracePeriodSeconds"]
    assert SEARCHER_SIGTERM_SECONDS < grace <= 60
    # No other workload drains a searcher on its own either.
    for workload, other in pod_specs():
        for c in containers(other):
            assert not stop_drains(c), f"{workload['metadata']['name']}/{c['name']}"


def test_the_stop_drain_check_can_fail() -> None:
    """The check above sees the hook this manifest once had, and a hook without a shell."""
    searchers = copy.deepcopy(find("StatefulSet", "codewell-searcher"))
    (container,) = searchers["spec"]["template"]["spec"]["containers"]
    container["lifecycle"] = {
        "preStop": {"exec": {"command": ["sh", "-c", 'exec codewell searcher drain --timeout 840 "$POD_NAME"']}}
    }
    validate_manifest(searchers, KUBERNETES_VERSIONS[0])  # valid Kubernetes: only this test refuses it
    assert stop_drains(container) == [["searcher", "drain"]]
    container["lifecycle"] = {"preStop": {"exec": {"command": ["/usr/local/bin/codewell", "searcher", "drain", "x"]}}}
    assert stop_drains(container) == [["searcher", "drain"]]
    container["lifecycle"] = {"postStart": {"exec": {"command": ["sh", "-c", "codewell searcher list"]}}}
    assert stop_drains(container) == []


def documented_drains() -> list[tuple[str, list[str]]]:
    """(the line, argv after `codewell`) of every `codewell searcher drain` docs/deployment.md shows in code: inline
    code spans and the lines of fenced blocks."""
    text = DEPLOYMENT_DOC.read_text(encoding="utf-8")
    fenced = re.findall(r"^ *```\n(.*?)^ *```$", text, flags=re.MULTILINE | re.DOTALL)
    prose = re.sub(r"^ *```\n.*?^ *```$", "", text, flags=re.MULTILINE | re.DOTALL)
    snippets = [line.split("#", 1)[0] for block in fenced for line in block.splitlines()]
    snippets += re.findall(r"`([^`\n]+)`", prose)
    found: list[tuple[str, list[str]]] = []
    for snippet in snippets:
        if "codewell searcher drain" in snippet:
            for argv in script_commands(snippet, {}):
                if argv[:2] == ["searcher", "drain"]:
                    found.append((snippet.strip(), argv))
    return found


def test_documented_drain_commands_are_real_and_drain_the_pod_a_scale_down_removes() -> None:
    """docs/deployment.md's drains parse as `codewell searcher drain` (by click, as the manifests' commands do);
    the Kubernetes scale-down drains the highest ordinal, the pod the StatefulSet removes, before lowering the
    count; compose's drains the service it runs in."""
    top_level = listed_commands(())
    found = documented_drains()
    assert len(found) >= 3, found
    for line, argv in found:
        check_codewell_command(f"docs/deployment.md: {line}", argv, top_level)

    text = DEPLOYMENT_DOC.read_text(encoding="utf-8")
    kubernetes = re.search(
        r"^kubectl -n codewell exec (\S+) -- codewell searcher drain (\S+)\n"
        r"kubectl -n codewell scale statefulset codewell-searcher --replicas=(\d+)$",
        text,
        flags=re.MULTILINE,
    )
    assert kubernetes, "docs/deployment.md: no scale-down (exec ... drain, then scale) of the StatefulSet"
    pod, drained, replicas = kubernetes.groups()
    # Lowering the count to N removes ordinal N (ordinals count from 0): that pod is drained, from inside itself.
    assert drained == pod == f"codewell-searcher-{replicas}"
    assert int(replicas) >= 3, "the doc's rule: at least 3 searchers"

    compose = re.search(r"^ *docker compose exec (\S+) codewell searcher drain (\S+)$", text, flags=re.MULTILINE)
    assert compose, "docs/deployment.md: no compose drain"
    service, drained = compose.groups()
    assert service == drained
    assert re.search(rf"^ *docker compose rm -sf {re.escape(service)}\b", text, flags=re.MULTILINE)
    # The names follow the shipped files: compose services are searcher-N, pods codewell-searcher-N.
    services = load_documents(COMPOSE_DIR / "docker-compose.yml")[0]["services"]
    assert re.fullmatch(r"searcher-\d+", service)
    assert "searcher-1" in services


def test_site_config_seeds_are_valid_site_configs(tmp_path: Path) -> None:
    """The site config the Job and the compose file copy onto the shared volume passes `codewell config validate`."""
    seeds = {
        "kubernetes": find("ConfigMap", "codewell-site-config")["data"]["site-config.json"],
        "compose": (COMPOSE_DIR / "site-config.json").read_text(encoding="utf-8"),
    }
    for name, text in seeds.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text, encoding="utf-8")
        result = CliRunner().invoke(cli, ["config", "validate", str(path)])
        assert result.exit_code == 0, f"{name}: {result.output}"
    broken = tmp_path / "broken.json"
    broken.write_text(seeds["kubernetes"].replace('"mcp.enabled"', '"mcp.enabeld"'), encoding="utf-8")
    result = CliRunner().invoke(cli, ["config", "validate", str(broken)])
    assert result.exit_code == 1
    assert "mcp.enabeld" in result.output


def quantity_mb(text: str) -> float:
    """A Kubernetes quantity ("10Gi", "4608Mi") in MB (10^6 bytes), the unit of the measured figures."""
    match = re.fullmatch(r"(\d+)(Mi|Gi)", text)
    assert match, text
    return int(match[1]) * {"Mi": 2**20, "Gi": 2**30}[match[2]] / 1e6


def test_shipped_sizes_follow_the_sizing_rules() -> None:
    """docs/deployment.md, "Sizing": the manifests are its 10,000-repository row, and the doc names their sizes."""
    measured_sources_mb, share_cap_mb = 3382, 1700  # the measured corpus; the largest share a searcher takes
    own_mb, mapped, build_peak_mb = 270, 1090 / 3382, 3800
    searcher_indexes, shared_data = (3100 + 4700) / 3382, (3100 + 3700) / 3382
    doc = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")

    searchers = find("StatefulSet", "codewell-searcher")
    assert searchers["spec"]["replicas"] >= max(3, -(-measured_sources_mb // share_cap_mb))
    resources = searchers["spec"]["template"]["spec"]["containers"][0]["resources"]
    disk = searchers["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]
    assert quantity_mb(disk) >= 2 * searcher_indexes * share_cap_mb
    assert quantity_mb(resources["requests"]["memory"]) >= own_mb + mapped * share_cap_mb
    assert quantity_mb(resources["limits"]["memory"]) >= build_peak_mb + mapped * share_cap_mb
    shared = find("PersistentVolumeClaim", SHARED_CLAIM)["spec"]["resources"]["requests"]["storage"]
    assert quantity_mb(shared) >= 1.5 * shared_data * measured_sources_mb
    web = find("Deployment", "codewell-web")["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert quantity_mb(web["requests"]["memory"]) >= own_mb
    for value in (disk, resources["requests"]["memory"], resources["limits"]["memory"], shared):
        assert value in doc, f"docs/deployment.md does not say {value}"
    assert f"memory request {web['requests']['memory']}" in doc


# ---------------------------------------------------------------- compose


def test_compose_file_names_the_services_volumes_and_environment() -> None:
    compose = load_documents(COMPOSE_DIR / "docker-compose.yml")[0]
    services = compose["services"]
    searchers = [f"searcher-{i}" for i in (1, 2, 3)]
    assert set(services) == {"postgres", "migrate", "web", "worker", *searchers}
    assert services["web"]["deploy"]["replicas"] == 2
    assert set(compose["volumes"]) == {"pgdata", "shared", *(f"{s}-data" for s in searchers)}
    codewell = {name: s for name, s in services.items() if s.get("image") == "codewell:latest"}
    assert set(codewell) == set(services) - {"postgres"}
    postgres = services["postgres"]["environment"]
    for name, service in codewell.items():
        env = service["environment"]
        assert env["CODEWELL_SEARCHERS"] == "database", name
        assert env["CODEWELL_DATABASE_URL"].startswith("postgresql+psycopg://codewell:"), name
        assert env["CODEWELL_DATABASE_URL"].endswith(f"@postgres:5432/{postgres['POSTGRES_DB']}"), name
        mounts = dict(v.split(":")[1::-1] for v in service["volumes"])
        assert mounts[env["CODEWELL_SHARED_DIR"]] == "shared", name
        if name != "migrate":
            assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    # Each searcher: its own volume at its data dir, its own name, an address the others reach it at.
    for name in searchers:
        service = services[name]
        mounts = dict(v.split(":")[1::-1] for v in service["volumes"])
        assert mounts[service["environment"]["CODEWELL_DATA_DIR"]] == f"{name}-data"
        command = service["command"]
        option = {command[i]: command[i + 1] for i in range(1, len(command) - 1) if command[i].startswith("--")}
        assert command[0] == "searcher"
        assert option["--name"] == name
        assert option["--advertise"] == f"http://{name}:{option['--port']}"
        assert f":{option['--port']}/.internal/healthz" in " ".join(service["healthcheck"]["test"])
    web_command = services["web"]["command"]
    assert web_command[:2] == ["serve", "--no-jobs"]
    assert f":{web_command[web_command.index('--port') + 1]}/readyz" in " ".join(services["web"]["healthcheck"]["test"])


def test_dockerfile_runs_codewell() -> None:
    """The manifests give `args` to the image's entrypoint: it must be codewell."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    entrypoints = re.findall(r"^ENTRYPOINT (\[.*\])$", text, flags=re.MULTILINE)
    assert len(entrypoints) == 1
    assert yaml.safe_load(entrypoints[0])[-1] == "codewell"
    assert re.search(r"^FROM python:3\.11-slim", text, flags=re.MULTILINE)
    assert re.search(r"pip install [^\n]*\s\.$", text, flags=re.MULTILINE), "the image installs the repository"
    assert re.search(r"apt-get install [^\n]*\bgit\b", text), "mirrors need git"


# ---------------------------------------------------------------- commands are real codewell commands


def test_every_command_in_the_manifests_is_a_codewell_command() -> None:
    top_level = listed_commands(())
    # What the interface guarantees today (the roles and migrations), from `codewell --help` itself.
    assert {"serve", "worker", "db"} <= top_level
    found = [*kubernetes_commands(), *compose_commands()]
    assert {command_path(argv) for _, argv in found} == EXPECTED_COMMANDS
    for where, argv in found:
        check_codewell_command(where, argv, top_level)


def test_a_wrong_command_fails_the_check() -> None:
    """The command check can fail: an unknown command, option or value, or a searcher option not promised."""
    top_level = listed_commands(())
    for argv in (
        ["serv", "--no-jobs"],
        ["serve", "--no-job"],
        ["serve", "--port", "http"],
        ["db", "upgrad"],
        ["worker", "--concurrency", "0"],
        ["searcher", "--listen", "0.0.0.0"],
        ["searcher", "drain"],
        ["searcher", "drain", "a", "b"],
        ["searcher", "drain", "--timeout", "soon", "codewell-searcher-3"],
    ):
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            check_codewell_command("test", argv, top_level)
