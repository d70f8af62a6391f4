"""The task catalogue both demo jobs run: names, instructions, the file each task edits and
its verifier tests."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from trials.demo.common import DATASET_NAME, DATASET_VERSION, seeded_rng

# name, instruction, the main file the agent edits, pytest test names
_TASKS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "configure-nginx-reverse-proxy",
        "Configure nginx so that /api is proxied to the service "
        "on port 8080 and static files are served from /srv/www.",
        "/etc/nginx/conf.d/app.conf",
        ("test_proxy_pass", "test_static_root", "test_nginx_config_valid"),
    ),
    (
        "fix-failing-pytest-suite",
        "The test suite in /app is failing after a dependency upgrade. Make all tests pass without deleting tests.",
        "/app/src/parser.py",
        ("test_parse_dates", "test_parse_numbers", "test_roundtrip", "test_no_tests_deleted"),
    ),
    (
        "git-recover-lost-commit",
        "A commit with the release notes was lost after a hard reset. Recover it onto the main branch.",
        "/repo/RELEASE_NOTES.md",
        ("test_commit_on_main", "test_notes_content"),
    ),
    (
        "sqlite-migrate-schema",
        "Add a non-null `created_at` column to the `orders` table in "
        "/data/shop.db, backfilling existing rows with the import date.",
        "/app/migrate.sql",
        ("test_column_exists", "test_backfill", "test_row_count_unchanged"),
    ),
    (
        "write-log-rotation-script",
        "Write /usr/local/bin/rotate-logs that gzips logs older "
        "than 7 days in /var/log/app and keeps at most 10 archives.",
        "/usr/local/bin/rotate-logs",
        ("test_script_executable", "test_gzip_old", "test_keep_ten"),
    ),
    (
        "python-cli-add-subcommand",
        "Add an `export --format csv|json` subcommand to the CLI in /app/cli.py with tests.",
        "/app/cli.py",
        ("test_export_csv", "test_export_json", "test_help_lists_export"),
    ),
    (
        "docker-compose-healthcheck",
        "Add healthchecks to every service in /app/docker-compose.yml and make `web` wait for a healthy `db`.",
        "/app/docker-compose.yml",
        ("test_healthchecks_present", "test_depends_on_condition"),
    ),
    (
        "rust-fix-borrow-checker",
        "The crate in /app does not compile. Fix the borrow checker "
        "errors without using unsafe or clone on the hot path.",
        "/app/src/cache.rs",
        ("test_cargo_build", "test_cargo_test", "test_no_unsafe"),
    ),
    (
        "csv-dedupe-large-file",
        "Deduplicate /data/events.csv (2M rows) by event_id keeping the "
        "latest timestamp; write /data/events.dedup.csv.",
        "/app/dedupe.py",
        ("test_output_exists", "test_unique_ids", "test_latest_kept", "test_memory_bound"),
    ),
    (
        "systemd-timer-backup",
        "Create a systemd timer that runs /opt/backup.sh nightly at 02:30 and persists across reboots.",
        "/etc/systemd/system/backup.timer",
        ("test_timer_unit", "test_service_unit", "test_persistent"),
    ),
    (
        "regex-extract-invoice-ids",
        "Write /app/extract.py that prints every invoice id "
        "(INV-YYYY-NNNNN) found in /data/mail/*.eml, sorted and unique.",
        "/app/extract.py",
        ("test_known_ids", "test_sorted_unique", "test_ignores_quoted"),
    ),
    (
        "postgres-slow-query-index",
        "The report query in /app/report.sql takes 40s. Add an index "
        "so that it runs under 1s without changing results.",
        "/app/migrations/0007_index.sql",
        ("test_index_exists", "test_query_plan_uses_index", "test_results_unchanged"),
    ),
    (
        "bash-parallel-downloads",
        "Make /app/fetch.sh download the URLs in urls.txt with at most 4 parallel jobs and retry failures twice.",
        "/app/fetch.sh",
        ("test_parallelism", "test_retries", "test_all_files_present"),
    ),
    (
        "flask-add-rate-limit",
        "Add a per-IP rate limit of 60 requests/minute to the Flask app "
        "in /app/app.py returning HTTP 429 with Retry-After.",
        "/app/app.py",
        ("test_under_limit", "test_over_limit_429", "test_retry_after_header"),
    ),
    (
        "node-fix-memory-leak",
        "The Node service in /app leaks memory under load. Find and fix "
        "the leak; heap must stay under 200MB after 10k requests.",
        "/app/server.js",
        ("test_heap_bound", "test_responses_ok"),
    ),
    (
        "ssl-cert-renewal-check",
        "Write a script that exits non-zero when any certificate in /etc/ssl/app expires within 14 days.",
        "/usr/local/bin/check-certs",
        ("test_expiring_detected", "test_valid_ok", "test_exit_codes"),
    ),
    (
        "makefile-parallel-build",
        "Fix the Makefile in /app so `make -j8` builds correctly; today it races on generated headers.",
        "/app/Makefile",
        ("test_parallel_build", "test_incremental_build"),
    ),
    (
        "k8s-manifest-resource-limits",
        "Add CPU and memory requests/limits to every container in /app/k8s/*.yaml following the policy in POLICY.md.",
        "/app/k8s/deployment.yaml",
        ("test_limits_present", "test_policy_values", "test_yaml_valid"),
    ),
    (
        "json-schema-validate-configs",
        "Validate every file in /app/configs against schema.json and fix the three invalid ones.",
        "/app/configs/billing.json",
        ("test_all_valid", "test_values_preserved"),
    ),
    (
        "go-race-condition-fix",
        "`go test -race ./...` reports a data race in /app/worker. Fix it without a global lock.",
        "/app/worker/pool.go",
        ("test_race_free", "test_throughput", "test_no_global_mutex"),
    ),
    (
        "awk-report-summary",
        "Produce /out/summary.txt with per-country totals from /data/sales.tsv using only awk/sort.",
        "/app/summary.sh",
        ("test_totals", "test_sorted", "test_only_awk"),
    ),
    (
        "cron-env-path-bug",
        "A cron job fails with 'command not found' but works in a shell. Fix the crontab so it runs.",
        "/etc/cron.d/report",
        ("test_cron_path", "test_job_runs"),
    ),
    (
        "redis-cache-invalidation",
        "Stale prices are served from Redis after updates. Add cache invalidation on write in /app/prices.py.",
        "/app/prices.py",
        ("test_invalidated_on_write", "test_cache_hit_rate"),
    ),
    (
        "tar-incremental-backup",
        "Implement incremental backups of /srv/data with GNU tar snapshot files into /backups.",
        "/app/backup.sh",
        ("test_full_then_incremental", "test_restore"),
    ),
)


@dataclass(frozen=True)
class TaskSpec:
    name: str
    instruction: str
    main_file: str
    tests: tuple[str, ...]
    checksum: str
    base_success: float  # probability of passing before any success_bias


def demo_tasks(count: int, seed: int = 0) -> list[TaskSpec]:
    """The dataset's tasks. Depends only on (count, seed), so both jobs share names and
    checksums."""
    out = []
    for i in range(count):
        name, instruction, main_file, tests = _TASKS[i % len(_TASKS)]
        if i >= len(_TASKS):  # benchmark sizes: reuse the catalogue with a suffix
            name = f"{name}-{i // len(_TASKS) + 1}"
        rng = seeded_rng(seed, DATASET_NAME, name, "task")
        out.append(
            TaskSpec(
                name=name,
                instruction=instruction,
                main_file=main_file,
                tests=tests,
                checksum=hashlib.sha256(f"{DATASET_NAME}@{DATASET_VERSION}/{name}/{seed}".encode()).hexdigest(),
                base_success=rng.choice((0.2, 0.4, 0.55, 0.7, 0.85)),
            )
        )
    return out
