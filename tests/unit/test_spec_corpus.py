"""``preflight --only compat`` on real job specs (tests/fixtures/specs, INDEX.json there).

Each spec was copied as found from public material (Google's docs and samples, python-aiplatform,
users' repositories) and labelled from the document its entry cites. The corpus is split by a
hash of each source; rules were written against ``dev``, ``test`` only measures. ``pytest -s``
prints both parts' figures (also: tests/benchmarks/bench_spec_corpus.py).
"""

from __future__ import annotations

import ast
import json

import pytest
import yaml

from tests.spec_corpus import (
    CORPUS_DIR,
    REQUIRED_CATEGORIES,
    SPLITS,
    categories,
    gcloud_command_spec,
    heredoc_config,
    load,
    score,
    spec_data,
    split_of,
)

KINDS = {"gcloud-config", "gcloud-command", "rest-body", "sdk-dict", "gcpc-payload", "gcpc-pipeline"}


@pytest.fixture(scope="module")
def corpus():
    return {split: load(split) for split in SPLITS}


def test_every_entry_names_its_source_and_the_documents_behind_its_label(corpus):
    entries = corpus["dev"] + corpus["test"]
    assert entries and {e.kind for e in entries} <= KINDS
    listed = {e.file for e in entries} | {e.config for e in entries if e.config}
    on_disk = {p.name for p in CORPUS_DIR.iterdir() if p.name != "INDEX.json"}
    assert listed == on_disk, "every fixture is indexed, every index entry has its file"
    raw = {r["id"]: r for r in json.loads((CORPUS_DIR / "INDEX.json").read_text(encoding="utf-8"))["entries"]}
    for e in entries:
        assert e.url.startswith("https://"), e.id
        if e.url.startswith("https://github.com/"):
            assert "/blob/" in e.url and len(e.url.split("/blob/")[1].split("/")[0]) == 40, e.id
        assert not e.config or "/blob/" in raw[e.id]["config_url"], e.id  # read at a commit too
        assert e.docs and e.why, e.id
        assert e.expect_parse in ("ok", "error") and e.expect_status in ("PASS", "WARN", "FAIL", ""), e.id
        assert not e.error_mentions or e.expect_parse == "error", e.id
        spec_data(e)  # every entry turns into a spec's data


def test_both_parts_hold_specs_and_no_source_is_split(corpus):
    assert corpus["dev"] and corpus["test"]
    for split, entries in corpus.items():
        assert all(split_of(e.source) == split for e in entries)


def test_the_corpus_raises_no_internal_error_and_each_part_scores_its_figure(corpus, capsys):
    for split in SPLITS:
        result = score(corpus[split])
        with capsys.disabled():
            print("\n" + result.format(f"spec corpus, {split} part"))
        assert not result.internal_errors, [o.message for o in result.internal_errors]
        # every spec judged as its document says, in both parts
        assert result.rules_right == result.total, result.format(split)


def test_the_index_is_valid_json_with_unique_ids():
    raw = json.loads((CORPUS_DIR / "INDEX.json").read_text(encoding="utf-8"))
    ids = [e["id"] for e in raw["entries"]]
    assert len(ids) == len(set(ids))


def test_categories_name_what_each_spec_holds(corpus):
    by_id = {e.id: e for e in corpus["dev"] + corpus["test"]}
    # a gcloud config: FLEX_START on a bundled A100 machine
    assert categories(by_id["docs-schedule-jobs-dws"]) >= {"flex-start", "gpu:NVIDIA_TESLA_A100"}
    # the SDK's snake_case dicts: a TPU v3 Pod, a reservation affinity
    assert "tpu:TPU_V3" in categories(by_id["aiplatform-unit-test-constants-tpu-v3-pod-32"])
    assert categories(by_id["aiplatform-unit-test-constants-reservation-any-k80"]) >= {
        "reservation",
        "snake-case",
        "gpu:NVIDIA_TESLA_K80",
    }
    # TPU v5e named by its machine type alone
    assert "tpu:TPU_V5_LITEPOD" in categories(by_id["aiplatform-unit-test-constants-tpu-v5e-2x2"])
    # a compiled GCPC pipeline carries GCPC's emitted defaults
    assert any("gcpc-defaults" in categories(e) for e in by_id.values() if e.kind == "gcpc-pipeline")
    covered = set().union(*(categories(e) for e in by_id.values()))
    assert covered & set(REQUIRED_CATEGORIES), "the corpus covers none of the required categories"


def test_a_training_jobs_run_keywords_become_the_spec_the_sdk_builds(corpus):
    by_id = {e.id: e for e in corpus["dev"] + corpus["test"]}
    # CustomPythonPackageTrainingJob(...).run(machine_type=..., scheduling_strategy=SPOT, ...)
    spec = spec_data(by_id["aic-risk-modeling-train-vertex-spot-t4"])
    (pool,) = spec["worker_pool_specs"]
    assert pool["machine_spec"] == {
        "machine_type": "n1-highmem-4",
        "accelerator_type": "NVIDIA_TESLA_T4",
        "accelerator_count": 1,
    }
    assert pool["disk_spec"] == {"boot_disk_type": "pd-ssd", "boot_disk_size_gb": 100}  # run()'s defaults
    assert pool["python_package_spec"]["python_module"] == "aic_risk_modeling.train.train_model"
    assert spec["scheduling"] == {"strategy": "SPOT"}
    # no base_output_dir: the SDK's timestamped folder of aiplatform.init's staging bucket, gs:// added
    assert spec["base_output_directory"]["output_uri_prefix"].startswith(
        "gs://aic-fire-amazon/aiplatform-custom-training-"
    )
    assert categories(by_id["aic-risk-modeling-train-vertex-spot-t4"]) >= {"spot", "python-package"}


def test_a_notebooks_code_cells_are_read_past_its_shell_lines(corpus):
    by_id = {e.id: e for e in corpus["dev"] + corpus["test"]}
    # the notebook runs a backslash-continued `! gcloud ...` before the SDK cells
    spec = spec_data(by_id["vertex-samples-local-mode-container-p100x4"])
    (pool,) = spec["worker_pool_specs"]
    assert pool["machine_spec"]["accelerator_type"] == "NVIDIA_TESLA_P100"
    assert pool["machine_spec"]["accelerator_count"] == 4
    assert pool["containerSpec"]["args"][-1] == "4"  # an f-string of a name bound in another cell
    assert spec["base_output_directory"]["output_uri_prefix"].endswith(
        "/tf-keras-txt-cls-dist-single-worker-gpus-local-mode-cont"
    )


def test_a_shell_scripts_heredoc_config_is_expanded_with_the_scripts_defaults(corpus):
    by_id = {e.id: e for e in corpus["dev"] + corpus["test"]}
    # DISK_GB="${DISK_GB:-650}" above the heredoc; ${BOOT} nests ${REPO_REF} and ${REPO_URL}
    spec = yaml.safe_load(spec_data(by_id["structure-prompt-adapter-submit-train-h100"]))
    (pool,) = spec["workerPoolSpecs"]
    assert pool["diskSpec"]["bootDiskSizeGb"] == 650
    assert (
        pool["containerSpec"]["imageUri"] == "us-central1-docker.pkg.dev/spa-dev-499900/spa/spa-cloud:0.3.0"
    )
    assert (
        "--branch main https://github.com/GreggHelt2/structure-prompt-adapter "
        in pool["containerSpec"]["args"][0]
    )
    # BOOT_CHECKOUT comes from a sourced file: left as found
    spec = yaml.safe_load(spec_data(by_id["structure-prompt-adapter-submit-determinism-h100"]))
    assert spec["workerPoolSpecs"][0]["containerSpec"]["args"][0].startswith("set -e; ${BOOT_CHECKOUT} && ")
    assert categories(by_id["structure-prompt-adapter-submit-train-h100"]) >= {"gpu:NVIDIA_H100_80GB"}


def test_heredoc_expansion_follows_bash():
    script = "\n".join(
        [
            'A="${A:-one}"  # a comment',
            "B='$A stays'",
            'C="${UNSET:-${A}-two}"',
            'E=""',
            "cat > f <<YAML",
            "a: $A",
            "b: $B",
            "c: ${C}",
            "d: ${MISSING} $MISSING $(date +%s)",
            "e: ${E:-dflt}|${E-kept}|",
            "f: \\$A",
            "YAML",
            "cat > g <<'RAW'",
            "a: ${A:-x}",
            "RAW",
            "cat > h <<YAML",
            "second: $A",
            "YAML",
        ]
    )
    assert yaml.safe_load(heredoc_config(script, "YAML")) == {
        "a": "one",
        "b": "$A stays",  # single quotes: no expansion
        "c": "one-two",  # the default expanded in turn
        "d": "${MISSING} $MISSING $(date +%s)",  # bound nowhere in the script: as found
        "e": "dflt||",  # :- replaces an empty value, - only an unset one
        "f": "$A",
    }
    assert heredoc_config(script, "RAW") == "a: ${A:-x}\n"  # a quoted delimiter expands nothing
    assert heredoc_config(script, "YAML#2") == "second: one\n"
    with pytest.raises(KeyError, match="no here-document <<JSON"):
        heredoc_config(script, "JSON")


def test_a_custom_jobs_run_sends_its_constructors_pools_and_the_run_keywords(corpus):
    from tests.spec_corpus import _value_of

    by_id = {e.id: e for e in corpus["dev"] + corpus["test"]}
    spec = spec_data(by_id["multi-node-gcp-launch-custom-job-run-t4"])
    chief, worker = spec["worker_pool_specs"]
    assert chief == worker and chief["python_package_spec"]["package_uris"] == ["gs://medfm_job/tmp.tar.gz"]
    # no base_output_dir: CustomJob's own folder name under its staging bucket, gs:// put in front
    assert spec["base_output_directory"] == {
        "output_uri_prefix": "gs://medfm_job/aiplatform-custom-job-${time}"
    }
    assert "scheduling" not in spec  # run(sync=True) asks for no Scheduling
    source = "\n".join(
        [
            "from google.cloud import aiplatform",
            "pools = [{'machine_spec': {'machine_type': 'a2-highgpu-1g'}, 'replica_count': 1}]",
            "job = aiplatform.CustomJob(display_name='x', worker_pool_specs=pools,",
            "                           base_output_dir='gs://b/out', persistent_resource_id='pr')",
            "job.submit(max_wait_duration=0, scheduling_strategy=Scheduling.Strategy.FLEX_START,",
            "           psc_interface_config={'network_attachment': 'na'}, service_account='sa@p.iam')",
        ]
    )
    made = _value_of("job.submit()", ast.parse(source))
    assert made["base_output_directory"] == {"output_uri_prefix": "gs://b/out"}
    assert made["persistent_resource_id"] == "pr"
    assert made["psc_interface_config"] == {"network_attachment": "na"}
    assert made["service_account"] == "sa@p.iam"
    # submit() sends max_wait_duration=0 ("0 is a valid value"), with the strategy
    assert made["scheduling"] == {"strategy": "FLEX_START", "max_wait_duration": "0s"}


def test_a_gcloud_command_line_becomes_the_spec_gcloud_sends(corpus):
    by_id = {e.id: e for e in corpus["dev"] + corpus["test"]}
    # worker_pool_spec="\\<newline>replica-count=1,\\<newline>...", then
    # --worker-pool-spec="${worker_pool_spec}"
    spec = spec_data(by_id["vertex-samples-pytorch-text-cls-custom-container-train-cloud-v100"])
    (pool,) = spec["workerPoolSpecs"]
    assert pool["machineSpec"] == {
        "machineType": "n1-standard-8",
        "acceleratorType": "NVIDIA_TESLA_V100",
        "acceleratorCount": 1,
    }
    container = pool["containerSpec"]
    # PROJECT_ID=$(gcloud config list ...) is the command's output, not known here: kept whole
    assert container["imageUri"] == (
        "gcr.io/$(gcloud config list --format 'value(core.project)')"
        "/pytorch_gpu_train_finetuned-bert-classifier"
    )
    assert container["args"][:3] == ["--model-name", "finetuned-bert-classifier", "--job-dir"]
    assert container["args"][3].endswith("-$(date +%Y%m%d%H%M%S)-custom-job")
    # local-package-path: gcloud builds an image from the executor image and runs it as a container
    spec = spec_data(by_id["vertex-samples-pytorch-text-cls-python-package-train-cloud-v100"])
    (pool,) = spec["workerPoolSpecs"]
    assert "pythonPackageSpec" not in pool
    assert "pytorch-gpu.1-7:latest and ../python_package/" in pool["containerSpec"]["imageUri"]
    assert categories(by_id["vertex-samples-pytorch-text-cls-python-package-train-cloud-v100"]) == {
        "gpu:NVIDIA_TESLA_V100"
    }


def test_gcloud_command_lines_are_read_as_bash_and_gcloud_read_them():
    script = "\n".join(
        [
            "IMG=us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-4:latest",
            "gcloud ai custom-jobs list --region=us-central1",
            "gcloud alpha ai custom-jobs create --region us-central1 \\",
            "  --worker-pool-spec=machine-type=a2-highgpu-1g,accelerator-type=NVIDIA_TESLA_A100 \\",
            "  --worker-pool-spec= \\",
            "  --worker-pool-spec='machine-type=n1-standard-4,replica-count=2,executor-image-uri=${IMG}' \\",
            "  --worker-pool-spec=machine-type=n1-standard-4,executor-image-uri=$IMG,python-module=t.task \\",
            "  --python-package-uris=gs://b/p.tar.gz --args='^:^--a=1,2:--b' --enable-web-access  # trailing",
            "gcloud ai custom-jobs create \\",
            '  --worker-pool-spec="machine-type=e2-standard-4,container-image-uri=i" \\',
            "  --command=python,-m,task --args=--x --args=--y --service-account sa@p.iam.gserviceaccount.com",
            "gcloud ai custom-jobs create --worker-pool-spec=machine-type=n1-standard-4,disk-size=200",
        ]
    )
    first = gcloud_command_spec(script, "custom-jobs create")
    a100, empty, literal, package = first["workerPoolSpecs"]
    # accelerator-count defaults to 1 when a type is given; replica-count to 1
    assert a100["machineSpec"] == {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    }
    assert a100["replicaCount"] == 1
    # --python-package-uris gives every pool without a container image a pythonPackageSpec
    assert a100["pythonPackageSpec"] == {"packageUris": ["gs://b/p.tar.gz"], "args": ["--a=1,2", "--b"]}
    assert empty == {}  # an empty --worker-pool-spec is an empty pool (a skipped one)
    # single quotes: ${IMAGE} stays as written; --python-package-uris and --args reach every package
    assert literal["pythonPackageSpec"]["executorImageUri"] == "${IMG}"
    assert literal["replicaCount"] == 2
    assert package["pythonPackageSpec"] == {
        "packageUris": ["gs://b/p.tar.gz"],
        "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-4:latest",
        "pythonModule": "t.task",
        "args": ["--a=1,2", "--b"],  # ^:^ names ':' as the delimiter (gcloud topic escaping)
    }
    assert first["enableWebAccess"] is True
    second = gcloud_command_spec(script, "custom-jobs create#2")
    (pool,) = second["workerPoolSpecs"]
    assert pool["containerSpec"] == {
        "imageUri": "i",
        "args": ["--x", "--y"],  # --args given twice: gcloud's UpdateAction joins them
        "command": ["python", "-m", "task"],
    }
    assert second["serviceAccount"] == "sa@p.iam.gserviceaccount.com"
    with pytest.raises(ValueError, match="gcloud refuses --worker-pool-spec key 'disk-size'"):
        gcloud_command_spec(script, "custom-jobs create#3")
    with pytest.raises(KeyError, match="no gcloud ai custom-jobs create #4"):
        gcloud_command_spec(script, "custom-jobs create#4")


def test_a_notebook_computes_its_spec_from_its_parameters_and_the_branches_it_takes(corpus):
    by_id = {e.id: e for e in corpus["dev"] + corpus["test"]}
    # accelerator_type is bound in an if/elif on machine_type; SCHEDULLING_STRATEGY in one on
    # scheduling_strategy; replica_count is num_samples // seeds // GPUs per machine (a regex)
    spec = spec_data(by_id["vertex-samples-weathernext-2-dws-h100-flex-start"])
    chief, worker = spec["worker_pool_specs"]
    assert chief["machine_spec"] == {
        "machine_type": "a3-highgpu-1g",
        "accelerator_type": "NVIDIA_H100_80GB",  # not the elif branch's NVIDIA_A100_80GB
        "accelerator_count": 1,
    }
    assert worker["replica_count"] == 1  # replica_count 2: a chief and one worker
    assert spec["scheduling"] == {"strategy": "FLEX_START"}
    # STAGING_BUCKET = os.path.join(BUCKET_URI, "temporal"), the SDK's default output folder
    assert spec["base_output_directory"]["output_uri_prefix"].startswith("gs://my-bucket/temporal/")
    assert categories(by_id["vertex-samples-weathernext-2-dws-h100-flex-start"]) >= {
        "flex-start",
        "gpu:NVIDIA_H100_80GB",
        "multi-worker",
    }


def test_python_sources_keep_only_the_branch_their_literals_take():
    from tests.spec_corpus import _value_of

    source = "\n".join(
        [
            'mode = "spot"',
            "n = 8",
            "if mode == 'spot':",
            "    strategy = Scheduling.Strategy.SPOT.name",
            "elif mode == 'dws':",
            "    strategy = 'FLEX_START'",
            "def launch(mode):",
            "    if mode == 'dws':  # a parameter: whatever the caller passes, left undecided",
            "        inner = 1",
            "spec = {",
            "    'strategy': strategy,",
            "    'count': n // 4 if len([1, 2]) > 1 else 0,",
            "    'dir': os.path.join('gs://b', 'out'),",
            "    'unknown': int(os.environ['N']),",
            "}",
        ]
    )
    tree = ast.parse(source)
    value = _value_of("spec", tree)
    inner = _value_of("launch.inner", ast.parse(source))
    assert value == {
        "strategy": "SPOT",  # the enum's .name, from the branch mode == 'spot' takes
        "count": 2,
        "dir": "gs://b/out",
        "unknown": "${int(os.environ['N'])}",  # not known here: a placeholder
    }
    assert inner == 1  # the parameter's if was kept


def test_a_notebooks_shell_capture_is_read_as_ipython_reads_it():
    from tests.spec_corpus import _notebook_code

    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "source": ["if True:\n", "    out = ! gsutil ls {B}\n", "    x = out[0]\n", "! echo hi\n"],
            }
        ]
    }
    code = _notebook_code(json.dumps(notebook))
    assert "    out = get_ipython().getoutput('gsutil ls {B}')" in code
    assert "# ! echo hi" in code
    compile(code, "notebook", "exec")


def test_a_launcher_builds_its_spec_from_its_config_file_through_its_functions(corpus):
    by_id = {e.id: e for e in corpus["dev"] + corpus["test"]}
    # main() json.loads job_config.json and calls launch_job(...); launch_job makes
    # job_args = dict(...), .update()s it in the branch strategy == "spot" takes, then
    # train_job.submit(**job_args)
    spec = spec_data(by_id["vertex-samples-a3mega-nemo-launch-spot"])
    chief, worker = spec["worker_pool_specs"]
    assert chief["machine_spec"] == {
        "machine_type": "a3-megagpu-8g",
        "accelerator_type": "NVIDIA_H100_MEGA_80GB",
        "accelerator_count": 8,  # int(config["gpus_per_node"])
    }
    assert chief["disk_spec"]["boot_disk_size_gb"] == 1000
    assert spec["scheduling"] == {"strategy": "SPOT", "restart_job_on_worker_restart": True}
    assert spec["base_output_directory"]["output_uri_prefix"].startswith("gs://<your_bucket/")
    assert categories(by_id["vertex-samples-a3mega-nemo-launch-spot"]) >= {"spot", "multi-worker"}


def test_function_parameters_take_their_first_calls_arguments():
    from tests.spec_corpus import _value_of

    source = "\n".join(
        [
            "def build(kind, count=2, *, flag=False):",
            "    spec = dict(kind=kind, count=count)",
            "    if kind == 'gpu':",
            "        spec.update({'gpu': True})",
            "    if FLAGS.debug:  # set at run time: not known here",
            "        spec.update(debug=True)",
            "    name = 'a'",
            "    name = f'{name}-b'  # the name on the right is the binding before",
            "    return spec",
            "def main():",
            "    config = json.load(open(path))",
            "    build(config['kind'], flag=True)",
            "    build('cpu')  # a later call: the first one decides",
        ]
    )
    tree = ast.parse(source)
    assert _value_of("build.spec", tree, {"kind": "gpu"}) == {
        "kind": "gpu",
        "count": 2,
        "gpu": True,
        "debug": True,
    }
    assert _value_of("build.name", ast.parse(source), {"kind": "gpu"}) == "a-b"
    # without the config file the parameter is not known: both branches' updates count
    assert _value_of("build.spec", ast.parse(source))["kind"] == "${config['kind']}"


def test_where_a_name_is_bound_is_read_from_each_file_never_from_an_earlier_one():
    # A file whose `x` lies inside a function, then files whose `x` lies at the top: each answer
    # is its own file's, even when a later parsed file reuses the memory (the id) of an earlier
    # one (once, a table keyed by id(tree) handed a later file the earlier file's answer).
    from tests.spec_corpus import _inside_function

    def node_x(tree):
        return next(n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "x")

    for _ in range(200):
        first = ast.parse("def f():\n    x = 1\n")
        assert _inside_function(node_x(first), first)
        del first
        later = ast.parse("x = 1\n")
        assert not _inside_function(node_x(later), later)
