"""Compliance audits (TEST01, TEST04; TEST06 for LLM benchmarks; TEST07 and TEST09 for gpt-oss-120b; TEST08 for
dlrm-v3):
``code.common.compliance.audit``.

The list of audit tests is the round table's (``code.common.rounds.AUDIT_TESTS``); which ones a
benchmark needs is its round entry's ``compliance_tests``.
"""
