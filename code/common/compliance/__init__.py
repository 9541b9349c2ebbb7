"""Compliance audits (TEST01, TEST04; TEST06 reserved for LLM benchmarks).

Entry point: ``code.common.compliance.audit.run_audit(settings_or_benchmark, test)``.
Nothing heavy is imported here.
"""
TESTS = ("TEST01", "TEST04", "TEST06")


def run_audit(target, test, **kw):
    from code.common.compliance.audit import run_audit as _run

    return _run(target, test, **kw)


def run_audits(cli, settings):
    """``--action=run_audit_harness`` (called by code.common.actions)."""
    from code.common.compliance.audit import run_audits as _run

    return _run(cli, settings)
