"""A site's plugin package, installed with pip, is found, selected and called like a builtin;
broken plugins are reported with their distribution, entry point and error."""

import json
import sys

FUZZBALL = [sys.executable, "-m", "fuzzball_core.cli"]


def plugin_list(run, *sites):
    result = run(*FUZZBALL, "plugin", "list", "-o", "json", sites=sites)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_installed_package_appears_in_plugin_list(run_with_sites, example_plugin_site):
    listing = plugin_list(run_with_sites, example_plugin_site)
    (scheduler,) = [s for s in listing["drivers"]["scheduler"] if s["name"] == "example"]
    assert scheduler["distribution"] == "fuzzball-example-plugin"
    assert scheduler["version"] == "1.2.3"
    assert scheduler["status"] == "ok"
    (hooks,) = [h for h in listing["hooks"] if h["name"] == "example-site-rules"]
    assert hooks["hooks"] == ["fuzzball_validate_workflow"]


def test_plugin_is_absent_until_installed(run_with_sites):
    listing = plugin_list(run_with_sites)
    assert "example" not in [s["name"] for s in listing["drivers"]["scheduler"]]


def test_configuration_selects_the_third_party_scheduler(run_with_sites, example_plugin_site):
    result = run_with_sites(
        *FUZZBALL,
        "plugin",
        "check",
        "--process",
        "orchestrate",
        sites=(example_plugin_site,),
        config="scheduler: {driver: example}\n",
    )
    assert result.returncode == 0, result.stderr
    assert "scheduler example" in result.stdout


def test_selected_driver_is_an_instance_of_the_site_class(run_with_sites, example_plugin_site):
    code = (
        "from fuzzball_core.startup import prepare_process\n"
        "ctx = prepare_process('orchestrate')\n"
        "print(type(ctx.drivers['scheduler']).__module__, ctx.drivers['scheduler'].config)\n"
    )
    result = run_with_sites(
        sys.executable,
        "-c",
        code,
        sites=(example_plugin_site,),
        config="scheduler: {driver: example, options: {spread: true}}\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split(" ", 1) == [
        "fuzzball_example_plugin.scheduler",
        "{'spread': True}\n",
    ]


def test_selected_driver_places_jobs(run_with_sites, example_plugin_site):
    code = (
        "from fuzzball_core.startup import prepare_process\n"
        "from fuzzball_core.scheduling import JobRequest, NodeInfo, Resources\n"
        "scheduler = prepare_process('orchestrate').drivers['scheduler']\n"
        "for n in ('a', 'b'):\n"
        "    scheduler.upsert_node(NodeInfo(n, Resources(4, 2**30)))\n"
        "jobs = [JobRequest(f'j{i}', Resources(2, 0), submitted_at=i) for i in range(5)]\n"
        "result = scheduler.schedule(jobs, now=0)\n"
        "print([p.node_ids[0] for p in result.placements], sorted(result.diagnoses))\n"
    )
    result = run_with_sites(
        sys.executable,
        "-c",
        code,
        sites=(example_plugin_site,),
        config="scheduler: {driver: example}\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['a', 'b', 'a', 'b'] ['j4']"


def test_broken_import_is_listed_with_distribution_and_error(run_with_sites, broken_plugin_site):
    listing = plugin_list(run_with_sites, broken_plugin_site)
    (driver,) = [s for s in listing["drivers"]["scheduler"] if s["name"] == "broken-import"]
    assert driver["status"] == "broken"
    assert driver["distribution"] == "fuzzball-broken-plugin"
    assert "fuzzball_no_such_library" in driver["error"]


def test_hookimpl_with_wrong_arguments_is_listed_as_broken(run_with_sites, broken_plugin_site):
    listing = plugin_list(run_with_sites, broken_plugin_site)
    (hooks,) = [h for h in listing["hooks"] if h["name"] == "bad-signature"]
    assert hooks["status"] == "broken"
    assert "cluster_name" in hooks["error"]


def test_hookimpl_for_an_unknown_hook_is_listed_as_broken(run_with_sites, broken_plugin_site):
    listing = plugin_list(run_with_sites, broken_plugin_site)
    (hooks,) = [h for h in listing["hooks"] if h["name"] == "unknown-hook"]
    assert hooks["status"] == "broken"
    assert "fuzzball_validate_workfow" in hooks["error"]


def test_broken_plugins_do_not_stop_the_listing_of_good_ones(run_with_sites, broken_plugin_site):
    listing = plugin_list(run_with_sites, broken_plugin_site)
    good = [h["name"] for h in listing["hooks"] if h["status"] == "ok"]
    assert {"nvidia", "procfs-metrics"} <= set(good)


def test_table_listing_reports_broken_plugins_on_stderr(run_with_sites, broken_plugin_site):
    result = run_with_sites(*FUZZBALL, "plugin", "list", sites=(broken_plugin_site,))
    assert result.returncode == 0
    assert "broken: scheduler 'broken-import' from fuzzball-broken-plugin" in result.stderr


def test_process_needing_a_broken_driver_refuses_to_start(run_with_sites, broken_plugin_site):
    result = run_with_sites(
        *FUZZBALL,
        "plugin",
        "check",
        "--process",
        "orchestrate",
        sites=(broken_plugin_site,),
        config="scheduler: {driver: broken-import}\n",
    )
    assert result.returncode == 2
    message = result.stderr
    assert "fuzzball-broken-plugin" in message
    assert "fuzzball.schedulers" in message
    assert "fuzzball_broken_plugin.needs_missing_library:Scheduler" in message
    assert "No module named 'fuzzball_no_such_library'" in message
    assert "Traceback" not in message


def test_process_requiring_a_broken_hook_plugin_refuses_to_start(
    run_with_sites, broken_plugin_site
):
    result = run_with_sites(
        *FUZZBALL,
        "plugin",
        "check",
        sites=(broken_plugin_site,),
        config="plugins: {require: [bad-signature]}\n",
    )
    assert result.returncode == 2
    assert "bad-signature" in result.stderr
    assert "fuzzball-broken-plugin" in result.stderr


def test_process_not_needing_the_broken_plugin_starts(run_with_sites, broken_plugin_site):
    result = run_with_sites(
        *FUZZBALL, "plugin", "check", sites=(broken_plugin_site,), config="plugins: {}\n"
    )
    assert result.returncode == 0, result.stderr
    assert "cli: ready" in result.stdout


def test_missing_driver_names_the_group_and_what_is_available(run_with_sites):
    result = run_with_sites(
        *FUZZBALL,
        "plugin",
        "check",
        "--process",
        "orchestrate",
        config="scheduler: {driver: nosuch}\n",
    )
    assert result.returncode == 2
    assert "no scheduler plugin named 'nosuch'" in result.stderr


def test_site_validation_hook_is_called_by_workflow_validate(
    run_with_sites, example_plugin_site, tmp_path
):
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(
        "version: v1\njobs:\n  hello:\n    image:\n      uri: docker://alpine:latest\n"
        "    command: [echo, hi]\n"
    )
    result = run_with_sites(
        *FUZZBALL, "workflow", "validate", str(workflow), sites=(example_plugin_site,)
    )
    assert result.returncode == 1
    assert "jobs.hello.policy.timeout" in result.stdout + result.stderr
    assert "site rule: set a timeout" in result.stdout + result.stderr


def test_workflow_validate_without_the_site_plugin_accepts_the_file(run_with_sites, tmp_path):
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(
        "version: v1\njobs:\n  hello:\n    image:\n      uri: docker://alpine:latest\n"
        "    command: [echo, hi]\n"
    )
    result = run_with_sites(*FUZZBALL, "workflow", "validate", str(workflow))
    assert result.returncode == 0, result.stderr
