"""The pre-flight submission checks, one module per concern (as the official checker splits them).

``findings`` holds what they share; ``performance``, ``accuracy``, ``compliance``, ``measurements``
and ``system`` each judge one part of a scenario directory or of a submitter's tree; ``endpoints`` judges a
scenario directory holding an endpoints-client report in place of LoadGen's logs. The tree walk,
the CLI and the official checker run are in ``code.common.submission.check``.
"""
