"""MATH500 grading as the DeepSeek-R1 reference does it: PRM800K's ``grading.grader.grade_answer(given_answer,
ground_truth)`` (github.com/openai/prm800k, prm800k/grading/grader.py and math_normalize.py), written here from
that grader's behaviour, not imported (the reference loads it from a git submodule).

An answer is right when either
  (a) Hendrycks' MATH normalisation (``mathd``: \\text{} unwrapped, \\left/\\right, degrees, \\$, units after
      "\\text{ ", percent, leading zeros, "k = " prefixes, \\sqrt3 / \\frac12 / a/b forms) makes both strings
      equal, or
  (b) PRM800K's own normalisation (units, million/billion, latex to text through pylatexenc, mixed numbers,
      braces, case, formatted integers) makes them equal, or the answers split into the same number of tuple /
      interval elements with the same brackets, each pair equal: unreduced fractions only as the same string,
      an integer only to an integer string, otherwise when sympy simplifies their difference to 0 (expressions
      with more than two distinct letters or exponents like ``^{`` are not given to sympy).

sympy comes with torch; pylatexenc is pinned in requirements.txt as the reference's prm800k setup needs it.
"""
from __future__ import annotations

import re

_UNITS = ("degree", "cm", "centimeter", "meter", "mile", "second", "minute", "hour", "day", "week", "month", "year",
          "foot", "feet", "inch", "yard")
_TEXT = re.compile(r"^\\text\{(?P<text>.+?)\}$")
_BRACKETS = "()[]"


# --- Hendrycks' MATH normalisation (prm800k/grading/math_normalize.py) ---------------------------

class _Keep(Exception):
    """The normalisation gave up: the answer is compared as it was."""


def _braced_fracs(s: str) -> str:
    head, *rest = s.split("\\frac")
    out = [head]
    for part in rest:
        out.append("\\frac")
        if part[0] == "{":                          # an empty part raises: the caller keeps the answer
            out.append(part)
            continue
        if len(part) < 2:
            return s
        a, b, tail = part[0], part[1], part[2:]
        out.append("{" + a + "}{" + b + "}" + tail if b != "{" else "{" + a + "}" + b + tail)
    return "".join(out)


def _slash_fraction(s: str) -> str:
    parts = s.split("/")
    if len(parts) != 2:
        return s
    try:
        a, b = int(parts[0]), int(parts[1])
    except ValueError:
        return s
    return "\\frac{%d}{%d}" % (a, b) if s == f"{a}/{b}" else s


def _braced_sqrt(s: str) -> str:
    if "\\sqrt" not in s:
        return s
    head, *rest = s.split("\\sqrt")
    return head + "".join("\\sqrt" + p if p[0] == "{" else "\\sqrt{" + p[0] + "}" + p[1:] for p in rest)


def _mathd_strip(s: str) -> str:
    for old, new in (("\n", ""), ("\\!", ""), ("\\\\", "\\"), ("tfrac", "frac"), ("dfrac", "frac"),
                     ("\\left", ""), ("\\right", ""), ("^{\\circ}", ""), ("^\\circ", ""), ("\\$", "")):
        s = s.replace(old, new)
    if "\\text{ " in s:                                 # units on the right
        parts = s.split("\\text{ ")
        if len(parts) != 2:
            raise _Keep
        s = parts[0]
    s = s.replace("\\%", "").replace("\\%", "").replace(" .", " 0.").replace("{.", "{0.")
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    sides = s.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:
        s = sides[1]
    s = _braced_sqrt(s).replace(" ", "")
    s = _braced_fracs(s)
    if s == "0.5":
        s = "\\frac{1}{2}"
    return _slash_fraction(s)


def mathd_normalize(answer: str | None) -> str | None:
    if answer is None:
        return None
    answer = answer.strip()
    try:
        m = _TEXT.search(answer)
        if m is not None:
            answer = m.group("text").strip()
        return _mathd_strip(answer)
    except (_Keep, IndexError, AssertionError):
        return answer


# --- PRM800K's normalisation and sympy check (prm800k/grading/grader.py) -------------------------

def _formatted_commas_out(s: str) -> str:
    pat = re.compile(r"(\d)(,)(\d\d\d)($|\D)")
    while True:
        nxt = pat.sub(r"\1\3\4", s)
        if nxt == s:
            return nxt
        s = nxt


def _close_to_int(x: float) -> bool:
    try:
        return abs(x - int(round(x))) <= 1e-7
    except (OverflowError, ValueError, TypeError):
        return False


def _int_string(s: str) -> bool:
    try:
        return _close_to_int(float(_formatted_commas_out(s)))
    except (ValueError, TypeError):
        return False


def _float_string(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def _fraction_string(s: str) -> bool:
    return re.search(r"^-?[0-9]+.?/0*[1-9][0-9]*.?$", s) is not None


def _latex_to_text(s: str) -> str:
    from pylatexenc import latex2text

    s = s.replace("\\tfrac", "\\frac").replace("\\dfrac", "\\frac").replace("\\frac", " \\frac")
    s = latex2text.LatexNodes2Text().latex_to_text(s)
    for old, new in (("√", "sqrt"), ("π", "pi"), ("∞", "inf"), ("∪", "U"), ("·", "*"), ("×", "*")):
        s = s.replace(old, new)
    return s.strip()


def normalize(expr: str | None) -> str | None:
    if expr is None:
        return None
    m = _TEXT.search(expr)
    if m is not None:
        expr = m.group("text")
    for old, new in (("\\%", "%"), ("\\$", "$"), ("$", ""), ("%", ""), (" or ", " , "), (" and ", " , "),
                     ("million", "*10^6"), ("billion", "*10^9"), ("trillion", "*10^12")):
        expr = expr.replace(old, new)
    for unit in _UNITS:
        expr = re.sub(unit + r"(es)?(s)? *(\^[0-9]+)?", "", expr)
    expr = re.sub(r"\^ *\\circ", "", expr)
    if expr and expr[0] == "{" and expr[-1] == "}":
        expr = expr[1:-1]
    expr = re.sub(r",\\! *", "", expr)
    if _float_string(expr) and _close_to_int(float(expr)):
        expr = str(int(round(float(expr))))
    if "\\" in expr:
        try:
            expr = _latex_to_text(expr)
        except Exception:       # pylatexenc's parse errors: the text stays as it is, as the grader's bare except
            pass
    expr = re.sub(r"- *", "-", expr)
    expr = re.sub(r"([0-9]) +([0-9])", r"\1+\2", expr)          # a mixed number: 7 3/4 -> 7+3/4
    expr = expr.replace(" ", "").replace("{", "").replace("}", "").lower()
    if _int_string(expr):
        expr = str(int(float(expr.replace(",", ""))))
    return expr


def _sympy_allowed(expr: str) -> bool:
    letters = {c for c in expr.replace("sqrt", "").replace("frac", "") if c.isalpha()}
    if len(letters) > 2 or "^{" in expr or "^(" in expr:
        return False
    return re.search(r"\^[0-9]+\^", expr) is None and re.search(r"\^[0-9][0-9]+", expr) is None


def sympy_equal(truth: str, given: str) -> bool:
    try:
        import sympy
        from sympy.parsing import sympy_parser

        expr = f"({truth})-({given})"
        if not _sympy_allowed(expr):
            return False
        parsed = sympy_parser.parse_expr(expr.replace("^", "**"), transformations=(
            sympy_parser.standard_transformations + (sympy_parser.implicit_multiplication_application,)))
        return sympy.simplify(parsed) == 0
    except Exception:
        return False


def _elements(expr: str) -> list[str]:
    expr = _formatted_commas_out(expr)
    if not expr:
        return []
    if len(expr) > 2 and expr[0] in _BRACKETS and expr[-1] in _BRACKETS \
            and not any(c in expr[1:-1] for c in _BRACKETS):
        return [e.strip() for e in expr[1:-1].split(",")]
    return [expr]


def grade_answer(given_answer: str | None, ground_truth: str) -> bool:
    """PRM800K's verdict on ``given_answer`` against ``ground_truth``."""
    if given_answer is None:
        return False
    if mathd_normalize(ground_truth) == mathd_normalize(given_answer):
        return True
    truth, given = normalize(ground_truth), normalize(given_answer)
    if truth is None:
        return False
    if truth == given:
        return True
    if not given:
        return False
    te, ge = _elements(truth), _elements(given)
    if len(te) > 1 and (truth[0] != given[0] or truth[-1] != given[-1]):
        return False
    if len(te) != len(ge):
        return False
    for t, g in zip(te, ge):
        if _fraction_string(t) and _fraction_string(g):
            ok = t == g                        # unreduced fractions are not simplified
        elif _int_string(t) != _int_string(g):
            ok = False                         # an integer needs an integer
        else:
            ok = sympy_equal(t, g)
        if not ok:
            return False
    return True


def judge(parsed, truth) -> bool:
    """The references' evaluate_math500: no answer or no truth is wrong; the answer stripped, the truth as str."""
    if not parsed or not truth:
        return False
    parsed = str(parsed).strip()
    return bool(parsed) and grade_answer(parsed, str(truth))
