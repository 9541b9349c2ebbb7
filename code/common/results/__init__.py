"""Runs as data, after they ran: ``records`` (metadata.json, the summary table), ``loadgen_logs``
(LoadGen's accuracy and detail logs), ``accuracy_text`` (accuracy.txt), ``explain`` (why a run is
INVALID and what to rerun) and ``selection`` (which runs a submission may take).
"""
