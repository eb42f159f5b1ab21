import argparse
from pathlib import Path

import pytest
import yaml

from jobrec_core.config import ConfigError, load_config
from jobrec_core.runtime import add_common_arguments, config_from_args
from tests.helpers import REPO

CONF = REPO / "conf"


def write(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(text, encoding="utf-8")


@pytest.fixture
def conf_copy(tmp_path: Path) -> Path:
    for source in CONF.glob("*.yaml"):
        write(tmp_path, source.name, source.read_text(encoding="utf-8"))
    return tmp_path


def test_base_holds_the_pipeline_constants():
    config = load_config("base", conf_dir=CONF)
    assert config.cleaning.min_jobs == 3
    assert config.cleaning.min_top_score == 4
    assert config.cleaning.wmd_similarity_threshold == 0.45
    assert config.cleaning.wmd_fields == ["title", "function", "keywords"]
    assert config.queries.max_terms == 300
    assert config.queries.drop_first_fields == ["requirement_summary"]
    assert config.retrieval.top_k == 100
    assert config.retrieval.boosts == {
        "function": 1.5,
        "title": 1.5,
        "requirement_summary": 1.2,
        "keywords": 1.5,
        "description": 1.0,
    }
    assert config.elasticsearch.similarity.k1 == 1.2
    assert config.elasticsearch.similarity.b == 0.75
    assert config.histograms.bins == 30
    assert config.embeddings.vector_size == 100
    assert config.embeddings.window == 5
    assert (config.pairs.train, config.pairs.dev, config.pairs.test) == (27000, 3000, 3000)
    assert config.training.max_epochs == 50
    assert config.training.early_stop_patience == 3
    assert (config.model.mlp_layers, config.model.mlp_width) == (10, 10)


@pytest.mark.parametrize(
    "env", ["local", "databricks,dev", "databricks,staging", "databricks,prod"]
)
def test_every_overlay_validates(env):
    config = load_config(env, conf_dir=CONF)
    assert config.env == env


@pytest.mark.parametrize("target", ["dev", "staging", "prod"])
def test_a_bundle_target_layers_its_overlay_over_databricks(target):
    config = load_config(["databricks", target], conf_dir=CONF)
    assert config.env == f"databricks,{target}"
    assert config.storage.root == f"/Volumes/jobrec_{target}/ml/jobrec"  # a UC volume
    assert config.mlflow.registry_uri == "databricks-uc"  # conf/databricks.yaml
    assert config.elasticsearch.auth.secret_scope == "jobrec-elasticsearch"
    if target != "dev":  # dev's are each developer's own, set by the bundle
        assert config.mlflow.experiment == f"/Shared/jobrec-{target}"
        assert config.mlflow.model_name == f"jobrec_{target}.ml.jobrec_drmm"


def test_overlays_apply_in_order_and_name_the_file_of_each_value(conf_copy):
    write(conf_copy, "a.yaml", "cleaning:\n  min_jobs: 5\n  min_top_score: 6\n")
    write(conf_copy, "b.yaml", "cleaning:\n  min_jobs: 7\n")
    config = load_config(["local", "a", "b"], conf_dir=conf_copy)
    assert (config.cleaning.min_jobs, config.cleaning.min_top_score) == (7, 6)
    assert load_config("local,a,b", conf_dir=conf_copy) == config
    assert load_config(["local", "b,a"], conf_dir=conf_copy).cleaning.min_jobs == 5
    write(conf_copy, "b.yaml", "cleaning:\n  min_jobs: seven\n")
    with pytest.raises(ConfigError, match=r"cleaning.min_jobs.*'seven'.*b\.yaml"):
        load_config("local,a,b", conf_dir=conf_copy)


def test_repeated_env_options_layer_the_overlays():
    parser = add_common_arguments(argparse.ArgumentParser())
    assert parser.parse_args([]).env == "local"
    args = parser.parse_args(["--env", "databricks", "--env", "prod"])
    assert args.env == "databricks,prod"
    assert config_from_args(args).env == "databricks,prod"
    typed = ["--env", "local", "--env", "seed"]  # "local" in source: the default's own object
    assert parser.parse_args(typed).env == "local,seed"


def test_the_seed_preset_keeps_its_models_and_index_apart_from_the_demo():
    """Both share one machine's node and MLflow store: a shared registry name let each run's
    gate replace the other's champion (trained on other embeddings) and interleaved their
    versions."""
    demo, seed = load_config("local", conf_dir=CONF), load_config("local,seed", conf_dir=CONF)
    assert demo.mlflow.tracking_uri == seed.mlflow.tracking_uri
    for setting in ["mlflow.model_name", "titles.model_name", "elasticsearch.index_alias"]:
        section, name = setting.split(".")
        assert getattr(getattr(demo, section), name) != getattr(getattr(seed, section), name)


def test_databricks_alone_is_refused_for_want_of_a_target():
    with pytest.raises(ConfigError, match=r"storage.root: empty.*--env databricks --env"):
        load_config("databricks", conf_dir=CONF)


def test_local_paths_resolve_against_the_project_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config("local", conf_dir=CONF)
    assert config.storage.root == str(REPO / ".jobrec")
    assert config.spark.jars_dir == str(REPO / "build" / "jars" / "spark")
    assert config.mlflow.tracking_uri == f"sqlite:///{REPO / '.jobrec' / 'mlflow' / 'mlflow.db'}"


def test_uris_are_left_alone():
    config = load_config("local", ["storage.root=dbfs:/jobrec"], CONF)
    assert config.storage.root == "dbfs:/jobrec"
    assert config.path("silver/candidates") == "dbfs:/jobrec/silver/candidates"


@pytest.mark.parametrize(
    "root", ["abfss://jobrec@account.dfs.core.windows.net/prod", "s3://bucket/jobrec"]
)
def test_a_remote_storage_root_is_refused_with_the_reason(root):
    # Petastorm (pyarrow), the checkpoints and gensim open the root with local file functions.
    with pytest.raises(ConfigError) as error:
        load_config("local", [f"storage.root={root}"], CONF)
    message = str(error.value)
    assert "storage.root: a remote URL" in message and "/Volumes/<catalog>" in message
    assert f"[in --set storage.root={root}]" in message


def test_set_overrides_win_and_are_parsed_as_yaml():
    config = load_config(
        "local",
        ["cleaning.wmd_similarity_threshold=0.5", "retrieval.boosts.title=2", "spark.master=null"],
        CONF,
    )
    assert config.cleaning.wmd_similarity_threshold == 0.5
    assert config.retrieval.boosts["title"] == 2.0
    assert config.retrieval.boosts["function"] == 1.5
    assert config.spark.master is None


def test_unknown_key_names_the_key_and_the_file(conf_copy):
    write(conf_copy, "local.yaml", "cleaning:\n  min_jbs: 3\n")
    with pytest.raises(ConfigError) as error:
        load_config("local", conf_dir=conf_copy)
    assert "cleaning.min_jbs: unknown key" in str(error.value)
    assert str(conf_copy / "local.yaml") in str(error.value)


def test_wrong_type_names_the_key_the_value_and_the_file(conf_copy):
    write(conf_copy, "local.yaml", "queries:\n  max_terms: three hundred\n")
    with pytest.raises(ConfigError) as error:
        load_config("local", conf_dir=conf_copy)
    message = str(error.value)
    assert "queries.max_terms" in message
    assert "'three hundred'" in message
    assert str(conf_copy / "local.yaml") in message


def test_strings_are_not_coerced_to_numbers():
    with pytest.raises(ConfigError, match=r"pairs.train.*--set pairs.train='27000'"):
        load_config("local", ["pairs.train='27000'"], CONF)


def test_out_of_range_value_is_refused():
    with pytest.raises(ConfigError, match=r"cleaning.wmd_similarity_threshold"):
        load_config("local", ["cleaning.wmd_similarity_threshold=1.5"], CONF)


def test_missing_key_is_reported(conf_copy):
    base = (conf_copy / "base.yaml").read_text(encoding="utf-8")
    write(conf_copy, "base.yaml", base.replace("  window: 5\n", ""))
    with pytest.raises(ConfigError, match=r"embeddings.window: missing key"):
        load_config("local", conf_dir=conf_copy)


def test_an_unknown_overlay_is_named_with_the_known_ones():
    with pytest.raises(ConfigError) as error:
        load_config(["databricks", "prd"], conf_dir=CONF)
    message = str(error.value)
    assert "unknown configuration overlay 'prd'" in message and "prd.yaml" in message
    assert "(overlays: databricks, dev, local, prod, seed, staging)" in message
    with pytest.raises(ConfigError, match="an empty overlay name"):
        load_config("databricks,", conf_dir=CONF)


def test_invalid_yaml_is_reported(conf_copy):
    write(conf_copy, "local.yaml", "spark: [unclosed\n")
    with pytest.raises(ConfigError, match=r"local.yaml: not valid YAML"):
        load_config("local", conf_dir=conf_copy)


@pytest.mark.parametrize("override", ["no_equals_sign", "=3"])
def test_malformed_override_is_refused(override):
    with pytest.raises(ConfigError, match=r"expected section.key=value"):
        load_config("local", [override], CONF)


def test_conf_dir_from_environment(monkeypatch):
    monkeypatch.setenv("JOBREC_CONF_DIR", str(CONF))
    assert load_config("local").env == "local"


def test_the_compared_models_must_be_configured_versions():
    with pytest.raises(ConfigError, match=r"evaluation\.models/curve_model \['v99'\]"):
        load_config("local", ["evaluation.models=[v1, v99]"], CONF)


def test_lead_fields_must_lead_the_document_fields():
    with pytest.raises(ConfigError, match=r"lead_fields \['keywords'\] must be the first"):
        load_config("local", ["histograms.lead_fields=[keywords]"], CONF)


def test_field_histograms_need_lead_fields():
    with pytest.raises(ConfigError, match=r"v9 read per-field histograms, which need"):
        load_config("local", ["model.version=v9"], CONF)
    assert load_config("local", ["model.version=v9", "histograms.lead_fields=[title]"], CONF)


def test_field_histograms_are_drmm_only():
    with pytest.raises(ConfigError, match=r"field_histograms needs architecture drmm"):
        load_config("local", ["model.versions.v6.field_histograms=true"], CONF)


def refusal(*overrides: str) -> str:
    """The message of the configuration error these overrides raise."""
    with pytest.raises(ConfigError) as error:
        load_config("local", list(overrides), CONF)
    return str(error.value)


def test_an_unknown_preset_is_refused_at_start_up():
    message = refusal("data.preset=nonsense")
    assert "data.preset: unknown preset (known: demo, seed, tiny)" in message
    assert "'nonsense'" in message and "[in --set data.preset=nonsense]" in message


@pytest.mark.parametrize(("key", "hint"), [("env", "--env"), ("project_root", "--conf-dir")])
def test_what_the_loader_sets_itself_is_refused_in_set(key, hint):
    with pytest.raises(ConfigError, match=rf"--set '{key}=x': {key} is .* {hint}"):
        load_config("local", [f"{key}=x"], CONF)


def test_a_model_version_only_set_names_is_refused_with_the_defined_ones():
    message = refusal("model.versions.v5x.bm25_mix=true")
    assert "model.versions.v5x: not a version of the configuration files (v1, v10," in message
    assert "[in --set model.versions.v5x.bm25_mix=true]" in message and "conf/" in message
    changed = load_config("local", ["model.versions.v1.bm25_mix=true"], CONF)
    assert changed.model.versions["v1"].bm25_mix  # a defined one's settings may change


def test_scientific_notation_in_set_is_a_number_unless_quoted():
    # YAML 1.1, which PyYAML reads, takes `1e-3` (no decimal point) for a string.
    def rate(value: str) -> float:
        config = load_config("local", [f"training.learning_rate={value}"], CONF)
        return config.training.learning_rate

    assert (rate("1e-3"), rate("2E-4"), rate("1.5e-3")) == (0.001, 0.0002, 0.0015)
    with pytest.raises(ConfigError, match=r"training.learning_rate.*'1e-3'"):
        rate("'1e-3'")
    assert load_config("local", ["mlflow.experiment=e1"], CONF).mlflow.experiment == "e1"


def test_keys_under_a_mapping_of_settings_keep_their_dots():
    config = load_config(
        "local",
        [
            "spark.conf.spark.driver.memory=8g",
            "elasticsearch.local.settings.cluster.routing.allocation.enable=all",
        ],
        CONF,
    )
    assert config.spark.conf["spark.driver.memory"] == "8g"
    assert config.spark.conf["spark.ui.enabled"] == "false"  # the others stay
    assert config.elasticsearch.local.settings["cluster.routing.allocation.enable"] == "all"
    # A mapping of sections still nests: a version's own keys.
    keep = load_config("local", ["model.versions.v4.phase2_keep.bm25=0.5"], CONF)
    assert keep.model.versions["v4"].phase2_keep == {"bm25": 0.5}


def test_the_baselines_must_start_with_bm25_the_reference_the_reports_name():
    for conf in sorted(CONF.glob("*.yaml")):  # every committed file that sets them complies
        baselines = (yaml.safe_load(conf.read_text()).get("evaluation") or {}).get("baselines")
        assert baselines is None or baselines[0] == "BM25", conf.name
    with pytest.raises(ConfigError) as error:
        load_config("local", ["evaluation.baselines=[WMD, BM25]"], CONF)
    message = str(error.value)
    assert "evaluation.baselines: the first baseline must be BM25" in message
    assert "--set 'evaluation.baselines=[BM25, WMD]'" in message
