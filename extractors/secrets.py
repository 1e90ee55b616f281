"""Secret redaction: replace credential-looking strings with ``[REDACTED:<kind>]`` before indexing.

Text from documents and code ends up in BM25 and vector indexes and in answers handed to agents,
so credentials must not survive ingestion. Two families of rules:

* **shaped** secrets recognisable on their own (``AKIA...``, ``ghp_...``, JWTs, private key
  blocks, also written as string literals, ``scheme://user:pass@host``, ``?password=...``
  parameters, ``curl -u user:pass``);
* **named** secrets: a value assigned to a name that says it is secret (``password = "..."``,
  ``API_KEY=...``, ``"client_secret": "..."``, ``setProperty("password", "...")``,
  ``<password>...</password>``). Values that are code rather than literals (``os.environ["X"]``,
  ``get_token()``, type hints, variables such as ``new_password2``) are left alone, and names that
  merely contain a secret word (``token_type``, ``password_hint``) count only for random-looking
  literals (``secret_key_base = "<128 hex digits>"``);
* **spoken** secrets in comments, docstrings, commit messages and documents ("the admin password
  is hunter2-Zq9", "pwd hunter2-Zq9", "the deploy token is ..."): one word that mixes letters with
  digits or symbols, and is not vocabulary ("sha256", "v1.2.3", "32bytes") or a path.

Every pattern is precompiled, anchored on a distinctive prefix or bounded in length, so redaction
stays linear in practice. Plain git shas are never touched: no rule matches bare hex.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MARKER = "[REDACTED:{}]"
_ALREADY = "[REDACTED:"


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    group: int = 0  # the group holding the secret; the rest of the match is kept
    check: Callable[[str], bool] | None = None
    # Lower-case substrings one of which any match must contain: a cheap test that lets most
    # rules skip most texts without running their regex at all.
    needles: tuple[str, ...] = ()


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


_TEMPLATE = re.compile(r"%[-+ #0-9.]*[sdfrxXeg]|\{[\w.:!]*\}")  # "%0.f0", "{name}"
_WORDY = re.compile(r"^[-_./:@]*(?:[A-Za-z]+|[0-9]+)(?:[-_./:@]+(?:[A-Za-z]+|[0-9]+))*[-_./:@]*$")
_GIT_SHA = re.compile(r"^[0-9a-f]{40}$")


def _high_entropy(value: str) -> bool:
    """A random-looking token: long, varied, and a mix of character classes.

    Paths, keys and slugs ("billing/api.py", "user-12345") are words and numbers joined by
    separators; a git sha is an identifier, not a secret. Neither counts.
    """
    if len(value) < 16 or value.startswith(_ALREADY):
        return False
    if _WORDY.match(value) or _GIT_SHA.match(value) or _DOTTED.match(value):
        return False
    if _TEMPLATE.search(value):
        return False
    # Generated keys mix letters and digits; identifiers and prose rarely do both at length.
    if not (re.search(r"[A-Za-z]", value) and re.search(r"[0-9]", value)):
        return False
    return _entropy(value) >= 3.3


_PLACEHOLDER = re.compile(
    r"""^(?:
        \$\{?[A-Za-z_][\w.-]*\}?      # $VAR, ${VAR}
      | \$\{\{.*\}\}                  # ${{ secrets.NAME }}
      | \{\{.*\}\}                    # {{ template }}
      | <[^>]*>                       # <your-token>
      | %\(?[\w.]*\)?s?               # %(name)s, %s
      | [*:.\-•]+ | x+ | X+          # masked
      | \#[0-9A-Fa-f]{3,8}            # a colour, as in editor themes ("Token": "#cccccc")
      | (?i:none|null|nil|true|false|changeme|change[-_]me|example|dummy|redacted|todo|tbd|xxx+)
      | (?i:pass|passwd|password|pwd|secret|token|api[_-]?key|your[_-]?\w+|my[_-]?\w+)
      | \[REDACTED:.*
    )$""",
    re.VERBOSE,
)


def _literal_secret(value: str) -> bool:
    """A quoted literal worth hiding: not empty, not a placeholder, not a reference."""
    return len(value) >= 4 and not _PLACEHOLDER.match(value)


def _token_literal(value: str) -> bool:
    """A literal assigned to a secret/token/key name: like a password, but without spaces
    (labels and messages such as "Token expired, log in again" are not credentials)."""
    return _literal_secret(value) and not any(c.isspace() for c in value)


def _bare_secret(value: str) -> bool:
    """An unquoted value (``.env``/YAML/ini) that is a secret rather than a word or expression.

    Requiring a letter and a digit or symbol keeps out type hints (``password: str``), references
    (``token: Token``, ``settings.SECRET_KEY``) and numbers (``max_tokens = 1000``).
    """
    if len(value) < 8 or _PLACEHOLDER.match(value) or _DOTTED.match(value) or _looks_like_identifier(value):
        return False
    return bool(re.search(r"[A-Za-z]", value) and re.search(r"[^A-Za-z_.-]", value))


# ``settings.SECRET_KEY``, ``cfg.auth.token``: attribute access, i.e. code.
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")

# Words that, as a part of an identifier, say it names a variable rather than holds a credential
# (``new_password2``, ``token_v2``, ``hashedPassword1``).
_IDENT_WORDS = frozenset(
    "pass passwd password pwd passphrase token tokens secret secrets key keys apikey cred creds credential "
    "credentials hash hashed new old current default raw plain user db auth access refresh api next prev "
    "session tmp temp cached stored expected given input encoded decoded salted v".split()
)
_IDENT_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _looks_like_identifier(value: str) -> bool:
    """A variable or type name: two or more word parts (``new_password2``, ``Ed25519PrivateKey``),
    one of them a credential or code word. Random strings split into many one-letter parts."""
    if not re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]{0,100}", value):
        return False
    parts = _IDENT_PART.findall(value)
    words = [p.lower() for p in parts if not p.isdigit()]
    if len(words) < 2 or len(parts) - len(words) > 2 or sum(len(w) == 1 for w in words) > 1:
        return False
    return any(w in _IDENT_WORDS for w in words)


# Words with digits that are vocabulary rather than credentials: versions, quantities, number
# literals, algorithms and sized types ("v1.2.3", "32bytes", "0x0080", "sha256", "argon2id",
# "base64-encoded", "uint64", "i32"), e-mail addresses.
_NOT_A_SECRET = re.compile(
    r"""(?ix)^(?:
        v?\d+(?:\.\d+)+[\w.\-]{0,20}
      | \d+[-_]?[a-z]{1,12}
      | [-+]?(?:0x[0-9a-f_]{1,64}|0o[0-7_]{1,64}|0b[01_]{1,128}|\d[\d_]{0,64}(?:\.\d{1,64})?(?:e[-+]?\d{1,4})?)[a-z]{0,3}
      | (?:sha|md|argon|pbkdf|base|utf|hs|rs|es|ps|aes|rsa|ed|crc|blake|x|u?int|float|complex
          |oauth|http|ipv|tls|ssl|tlsv|sslv)[-_]?\d{1,6}[a-z0-9]{0,4}(?:[-_][a-z]{1,20}){0,3}
      | [iuf](?:8|16|32|64|128) | u?int\d{1,3}_t | usize | isize | k8s
      | [\w.+\-]{1,64}@[\w\-]{1,63}(?:\.[\w\-]{1,63}){1,8}
    )$"""
)
_SYMBOL = re.compile(r"[!@#$%^&*+=~|?]")


def _spoken_secret(value: str) -> bool:
    """A short credential stated outside a string literal ("the password is hunter2-Zq9",
    ``passwd=hunter2``): a letter with a digit or symbol, and not code, vocabulary or a path."""
    if not 6 <= len(value) <= 200 or value.startswith(_ALREADY) or "://" in value:
        return False
    if _PLACEHOLDER.match(value) or _DOTTED.match(value) or _GIT_SHA.match(value) or _NOT_A_SECRET.match(value):
        return False
    if not re.search(r"[A-Za-z]", value) or not (re.search(r"[0-9]", value) or _SYMBOL.search(value)):
        return False
    return not _looks_like_identifier(value)


def _spoken_bare(value: str) -> bool:
    """Like :func:`_spoken_secret`, for a value given without any connecting word ("pwd X"): a
    path or option there is far more likely than a credential."""
    return "/" not in value and not value.startswith("-") and _spoken_secret(value)


_PLAIN_NAME = re.compile(r"[A-Za-z_]\w*")


def _spoken_operand(value: str) -> bool:
    """A bare value after ``=`` or ``:``. Passwords may be short, but short ones count only when
    they cannot be a variable (``passwd=hunter2-Zq9`` is a password, ``password = hashed2`` code)."""
    return _bare_secret(value) or (_spoken_secret(value) and not _PLAIN_NAME.fullmatch(value))


def _random_operand(value: str) -> bool:
    """A random-looking bare value that is not a type or variable name (``Ed25519PrivateKey``)."""
    return _high_entropy(value) and not _looks_like_identifier(value)


def _webhook_token(value: str) -> bool:
    """A webhook path that carries a random token in one of its segments."""
    return any(_high_entropy(part) for part in value.split("/"))


def _url_password(value: str) -> bool:
    return bool(value) and not _PLACEHOLDER.match(value)


# Words that make a name secret when the name ends with them ("db_password", "client_secret",
# "apiKey", "auth_token"). Only the ending matters, so "client_secret" needs no entry of its own.
_PASSWORD_NAMES = r"password|passwd|passphrase|pwd"
_STRONG_NAMES = r"secret|token|(?:api|access|secret|private)[_-]?key|apikey|conn(?:ection)?[_-]?string"
# Names ending in "key" are often harmless ("sort_key", "cache_key"): only random values count.
_WEAK_NAMES = r"key|hmac|salt|credentials?"

# The secret word must end the name ("db_password", not "password_hint"); what precedes it does
# not matter, so the regex starts at the word. Then an optional closing quote (JSON keys), an
# assignment operator (=, :, :=, =>) and the value.
_END_OF_NAME = r"""(?![A-Za-z0-9_])["']?"""
_QUOTED_VALUE = r"""\s*(?::=|=>|[:=])\s*(?P<q>["'`])(?P<v>[^"'`\n]{1,500})(?P=q)"""
# Unquoted values run to whitespace, ';' or ','; call or subscript syntax ends the match early
# and fails the lookahead, so code such as ``os.environ["X"]`` is never taken for a literal.
_BARE_VALUE = r"""[ \t]*(?::=|=|:)[ \t]*(?P<v>[^\s"'`;,()\[\]{}<>]{1,500})(?=[\s;,]|$)"""


def _named_quoted(names: str) -> re.Pattern[str]:
    return re.compile(f"(?i:{names})" + _END_OF_NAME + _QUOTED_VALUE)


def _named_bare(names: str) -> re.Pattern[str]:
    return re.compile(f"(?m)(?i:{names})" + _END_OF_NAME + _BARE_VALUE)


# The same names where the name is itself a string and the value the next one: the two arguments
# of a call (``props.setProperty("password", "...")``, ``os.environ.setdefault("API_TOKEN", "...")``;
# lists and tuples of names are not calls), an XML element (``<password>...</password>``) or a
# key/value attribute pair (``<add key="ApiKey" value="..."/>``, ``<property name="db.password" value="..."/>``).
def _call_pair(names: str) -> re.Pattern[str]:
    return re.compile(r"""[\w$]\([ \t]*(?P<n>["'`])[\w.\-]{0,60}?""" + f"(?i:{names})"
                      + r"""(?P=n)[ \t]*,[ \t]*(?P<q>["'`])(?P<v>[^"'`\n]{1,500})(?P=q)[ \t]*\)""")


def _xml_element(names: str) -> re.Pattern[str]:
    return re.compile(r"<(?:[\w.\-]{1,60}:)?[\w.\-]{0,60}?" + f"(?i:{names})" + r">(?P<v>[^<>\n]{1,500})</")


def _xml_pair(names: str) -> re.Pattern[str]:
    return re.compile(r"""(?i:key|name)[ \t]*=[ \t]*["'][\w.:\-]{0,60}?""" + f"(?i:{names})"
                      + r"""["'][ \t]+(?i:value)[ \t]*=[ \t]*(?P<q>["'])(?P<v>[^"'\n]{1,500})(?P=q)""")


# A random-looking literal on the same line after an assignment to a name that contains a secret
# word anywhere, not only at its end: ``config.secret_key_base = "..."``, ``clientSecret =
# process.env.X ?? "..."``. The word must stand as a part of the name (``tokenizer`` and
# ``passwordless`` do not count), and only high-entropy values made of key characters are taken
# (not regular expressions, templates, markup or URLs).
_HIDDEN_NAMES = (r"secret|token|passw(?:or)?d|passphrase|pwd|api[_-]?key|apikey|private[_-]?key"
                 r"|access[_-]?key|signing[_-]?key|credentials?")
_NEAR_SECRET_WORD = re.compile(
    r"(?:(?<![A-Za-z0-9])|(?<=[a-z0-9])(?=[A-Z]))" + f"(?i:{_HIDDEN_NAMES})" + r"(?![a-z])"
    r"""[A-Za-z0-9_\-]{0,40}["'`]?[ \t]*(?::=|=>|\?\?|\|\||[:=])[^\n"'`]{0,80}?"""
    r"""(?P<q>["'`])(?P<v>[A-Za-z0-9+/=_\-.~:@!#%&*^]{16,500})(?P=q)""")


def _random_literal(value: str) -> bool:
    """A high-entropy literal that is not a URL, a type or variable name, or an alphabet."""
    if "://" in value or not _high_entropy(value) or _looks_like_identifier(value):
        return False
    # "0123456789abcdef", "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567": character tables, not keys.
    steps = sum(ord(b) - ord(a) == 1 for a, b in zip(value, value[1:]))
    return steps < len(value) / 4


# Prose: the secret word, an optional "for the admin account", a verb ("is", "was set to") or
# an operator, then one word, optionally quoted. Trailing punctuation ends the sentence, not the
# value; anything else glued to the word (a call, a subscript) means code, and no match.
_SPOKEN_NAMES = (r"secret|token|credentials?|apikey"
                 r"|(?:api|access|secret|private|signing|encryption|license|deploy|auth|bot)[ _-]?(?:key|token)")
_SPOKEN_VALUE = (r"""["'`]?(?P<v>[^\s"'`<>()\[\]{},;]{0,199}[^\s"'`<>()\[\]{},;.:!?])"""
                 r"""(?=[.,;:!?]{0,5}(?:[\s"'`)\]}>]|$))""")
_VERB = (r"(?:(?:is|was|are|were)(?:[ \t]+(?:now|still|currently|temporarily))?"
         r"(?:[ \t]+(?:set|changed|reset|rotated)[ \t]+to)?|(?:set|changed|reset|rotated)[ \t]+to)")


def _spoken(names: str, *, verb: bool) -> re.Pattern[str]:
    """``<name> [for the admin account] is <value>`` (``verb``) or ``<name>: <value>``."""
    # Markdown emphasis may wrap the label: "**Password:** X", "**Token**: X".
    # A verb may end a line and the value start the next: prose is wrapped ("...was reset to\nX").
    link = f"[ \\t]+(?i:{_VERB})(?:[ \\t]+|[ \\t]*\\n[ \\t]*)" if verb else r"[ \t]*(?::=|=>|[:=])\*{0,2}[ \t]*"
    return re.compile(
        f"(?i:{names})" + r"(?![A-Za-z0-9_])"
        + (r"(?:[ \t]+(?i:for|of|on)(?:[ \t]+[\w.@\-]{1,40}){1,3}?)?" if verb else r"[\"'*]{0,2}")
        + link + _SPOKEN_VALUE,
        re.MULTILINE,
    )


def _r(kind: str, pattern: str, needles: tuple[str, ...], **kw: Any) -> _Rule:
    return _Rule(kind, re.compile(pattern), needles=needles, **kw)


_PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
_NOT_BEFORE = r"(?<![A-Za-z0-9_])"

_RULES: tuple[_Rule, ...] = (
    # Multi-line blocks first, so their base64 bodies are not half-eaten by other rules.
    # A key written as a string literal has "\\n" escapes, quotes and "+" between its lines (JSON,
    # Java or JavaScript concatenation); the block runs to its END line all the same.
    _r("private-key", _PEM_BEGIN + r"[A-Za-z0-9+/=\s:,.\-\\\"']{0,20000}?" + _PEM_END, ("private key",)),
    # A private key with its END line cut off (pasted into a postmortem, truncated by a log).
    _r("private-key", _PEM_BEGIN + r"(?:(?:\s|\\[nr]|[\"'+])*[A-Za-z0-9+/=:,.\-]{16,})*", ("private key",)),
    _r(
        "aws-access-key",
        r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[0-9A-Z]{16}(?![A-Z0-9])",
        ("akia", "asia", "abia", "acca", "agpa", "aida", "aipa", "anpa", "anva", "apka", "aroa", "asca"),
    ),
    _r(
        "aws-secret-key",
        r"(?i:aws)[A-Za-z0-9_.\- ]{0,30}?(?i:secret|private)[A-Za-z0-9_.\- ]{0,30}?"
        r"[\"']?\s*(?::=|=>|[:=])\s*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        ("aws",),
        group=1,
    ),
    _r("github-token", _NOT_BEFORE + r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}(?![A-Za-z0-9_])",
       ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    _r("github-token", _NOT_BEFORE + r"github_pat_[A-Za-z0-9_]{22,255}", ("github_pat_",)),
    _r("gitlab-token", _NOT_BEFORE + r"gl(?:pat|ptt|dt|rt|cbt|oas|ft|imt|soat|agent)-[A-Za-z0-9_\-]{20,255}",
       ("glpat-", "glptt-", "gldt-", "glrt-", "glcbt-", "gloas-", "glft-", "glimt-", "glsoat-", "glagent-")),
    _r("slack-token", _NOT_BEFORE + r"xox[abposre]-[A-Za-z0-9\-]{10,255}", ("xox",)),
    _r("slack-token", _NOT_BEFORE + r"xapp-\d-[A-Za-z0-9\-]{10,255}", ("xapp-",)),
    _r("slack-webhook", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{8,255}",
       ("hooks.slack.com",)),
    _r("discord-webhook", r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]{20,255}",
       ("/api/webhooks/",)),
    _r("teams-webhook",
       r"https://(?:[A-Za-z0-9\-]{1,63}\.webhook\.office\.com/webhookb2|outlook\.office(?:365)?\.com/webhook)"
       r"/[A-Za-z0-9@/\-]{20,600}",
       ("webhook.office.com", "outlook.office")),
    # Any other incoming-webhook URL whose path carries a random token (Mattermost, Rocket.Chat,
    # self-hosted relays): the token is hidden, the host and route stay.
    _r("webhook-url", r"/(?:hooks|webhooks?)/(?P<v>[A-Za-z0-9_\-]{1,200}(?:/[A-Za-z0-9_\-]{1,200}){0,4})",
       ("/hooks/", "/webhook/", "/webhooks/"), group=1, check=_webhook_token),
    _r("stripe-key", _NOT_BEFORE + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,255}", ("_live_", "_test_")),
    _r("stripe-webhook-secret", _NOT_BEFORE + r"whsec_[A-Za-z0-9]{24,255}", ("whsec_",)),
    _r("google-api-key", _NOT_BEFORE + r"AIza[0-9A-Za-z_\-]{35}(?![A-Za-z0-9_\-])", ("aiza",)),
    _r("google-oauth-secret", _NOT_BEFORE + r"GOCSPX-[A-Za-z0-9_\-]{20,60}", ("gocspx-",)),
    # OpenAI / Anthropic style: "sk-" then a long run that contains a digit (prose like
    # "sk-learn-style" has none, and is short).
    _r("api-key", r"(?<![A-Za-z0-9_\-])sk-(?=[A-Za-z0-9_\-]{0,200}\d)[A-Za-z0-9_\-]{32,255}", ("sk-",)),
    _r("digitalocean-token", _NOT_BEFORE + r"do[opr]_v1_[a-f0-9]{64}(?![A-Za-z0-9])", ("_v1_",)),
    _r("vault-token", _NOT_BEFORE + r"hv[sbr]\.[A-Za-z0-9_\-]{24,500}", ("hvs.", "hvb.", "hvr.")),
    _r("shopify-token", _NOT_BEFORE + r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}(?![A-Za-z0-9])", ("shpat_", "shpss_",
                                                                                                "shpca_", "shppa_")),
    _r("grafana-token", _NOT_BEFORE + r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}(?![A-Za-z0-9])", ("glsa_",)),
    _r("npm-token", _NOT_BEFORE + r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", ("npm_",)),
    _r("pypi-token", _NOT_BEFORE + r"pypi-AgE[A-Za-z0-9_\-]{50,500}", ("pypi-age",)),
    _r("huggingface-token", _NOT_BEFORE + r"hf_[A-Za-z0-9]{34,40}(?![A-Za-z0-9])", ("hf_",)),
    _r("sendgrid-key", _NOT_BEFORE + r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}", ("sg.",)),
    _r("twilio-key", _NOT_BEFORE + r"SK[0-9a-f]{32}(?![0-9A-Za-z])", ("sk",)),
    _r("jwt", r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,4000}\.eyJ[A-Za-z0-9_\-]{8,8000}\.[A-Za-z0-9_\-]{8,4000}",
       ("eyj",)),
    _r(
        "azure-connection-string",
        r"(?i:AccountKey|SharedAccessKey|SharedAccessSignature|SharedSecretValue)=(?P<v>[^;\s\"'<>]{8,1000})",
        ("accountkey=", "sharedaccesskey=", "sharedaccesssignature=", "sharedsecretvalue="),
        group=1,
    ),
    _r("azure-sas-signature", r"[?&]sig=(?P<v>[A-Za-z0-9%+/=]{20,500})", ("sig=",), group=1),
    _r(
        "url-password",
        r"\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s:/@'\"]{0,256}:(?P<v>[^\s@/'\"]{1,256})@",
        ("://",),
        group=1,
        check=_url_password,
    ),
    # Oracle's thin driver puts the password after a slash: jdbc:oracle:thin:<user>/<password>@//host/SID.
    _r("url-password", r"jdbc:oracle:thin:[\w.$\-]{1,100}/(?P<v>[^@\s\"'`{][^@\s\"'`]{0,199})@", ("jdbc:oracle:thin:",),
       group=1, check=_url_password),
    # Credentials as URL or connection-string parameters: ?user=app&password=...; ;password=...;
    _r("url-password", r"[?&;](?i:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?token|client[_-]?secret)"
       r"=(?P<v>[^&;\s\"'`#<>{][^&;\s\"'`#<>]{0,499})",
       ("password=", "passwd=", "pwd=", "secret=", "token=", "key="), group=1, check=_url_password),
    # Command lines: curl's -u with user and password, mysql's -p glued to the password. (A value
    # never starts with "{": that is an f-string's or a template's own syntax; "${VAR}" stays whole.)
    _r("password", r"\bcurl\b[^\n]{0,300}?[ \t](?:-u|--user)(?:[ \t]+|=)[\"']?[^\s:\"']{1,100}:"
       r"(?P<v>[^\s\"'`{,;)][^\s\"'`,;)]{0,199})", ("curl",), group=1, check=_url_password),
    _r("password", r"\bmysql(?:dump|admin|sh)?\b[^\n]{0,200}?[ \t]-p(?P<v>[^\s\"'`{\-][^\s\"'`,;)]{2,200})",
       ("mysql",), group=1, check=_url_password),
    _r(
        "bearer-token",
        r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:bearer|token|basic)\s+(?P<v>[A-Za-z0-9_\-.~+/=]{12,4000})",
        ("authorization",),
        group=1,
    ),
    # Named secrets, quoted then bare; strong names take any literal, weak names random ones.
    _Rule("password", _named_quoted(_PASSWORD_NAMES), 2, _literal_secret, ("pass", "pwd")),
    _Rule("secret", _named_quoted(_STRONG_NAMES), 2, _token_literal, ("secret", "token", "key", "conn")),
    _Rule("secret", _named_quoted(_WEAK_NAMES), 2, _high_entropy, ("key", "hmac", "salt", "credential")),
    _Rule("password", _named_bare(_PASSWORD_NAMES), 1, _spoken_operand, ("pass", "pwd")),
    _Rule("secret", _named_bare(_STRONG_NAMES), 1, _bare_secret, ("secret", "token", "key", "conn")),
    _Rule("secret", _named_bare(_WEAK_NAMES), 1, _random_operand, ("key", "hmac", "salt", "credential")),
    _Rule("password", _call_pair(_PASSWORD_NAMES), 2, _literal_secret, ("pass", "pwd")),
    _Rule("secret", _call_pair(_STRONG_NAMES), 2, _random_literal, ("secret", "token", "key", "conn")),
    _Rule("password", _xml_element(_PASSWORD_NAMES), 1, _literal_secret, ("pass", "pwd")),
    _Rule("secret", _xml_element(_STRONG_NAMES), 1, _token_literal, ("secret", "token", "key", "conn")),
    # (Needles that every match holds: "value=" for the attribute pairs, the compound names for the
    # literal near a secret word; plain "key" is in most source files.)
    _Rule("password", _xml_pair(_PASSWORD_NAMES), 2, _literal_secret, ("value=", "value =")),
    _Rule("secret", _xml_pair(_STRONG_NAMES), 2, _token_literal, ("value=", "value =")),
    _Rule("secret", _NEAR_SECRET_WORD, 2, _random_literal,
          ("secret", "token", "pass", "pwd", "apikey", "api_key", "api-key", "privatekey", "private_key",
           "private-key", "accesskey", "access_key", "access-key", "signing", "credential")),
    # Credentials stated in prose: comments, docstrings, commit messages, runbooks.
    _Rule("password", _spoken(_PASSWORD_NAMES, verb=True), 1, _spoken_secret, ("pass", "pwd")),
    _Rule("password", _spoken(_PASSWORD_NAMES, verb=False), 1, _spoken_operand, ("pass", "pwd")),
    _Rule("secret", _spoken(_SPOKEN_NAMES, verb=True), 1, _spoken_secret, ("secret", "token", "key", "credential")),
    _Rule("secret", _spoken(_SPOKEN_NAMES, verb=False), 1, _spoken_operand, ("secret", "token", "key", "credential")),
    _Rule("password", re.compile(f"(?i:{_PASSWORD_NAMES})" + _END_OF_NAME + r"[ \t]+" + _SPOKEN_VALUE), 1,
          _spoken_bare, ("pass", "pwd")),
)

# Identifies the rules: whatever was redacted under other rules (a cache, say) must be redacted
# again. Pattern changes show in the fingerprint by themselves; bump the version when a check does.
RULES_VERSION = 3
FINGERPRINT = hashlib.blake2b(
    "\0".join([str(RULES_VERSION), *(f"{r.kind}:{r.group}:{r.pattern.pattern}" for r in _RULES)]).encode(),
    digest_size=8,
).hexdigest()


def redact(text: str, *, keep_lines: bool = False) -> tuple[str, int]:
    """Replace secrets in ``text`` with ``[REDACTED:<kind>]``; return the new text and the count.

    ``keep_lines`` keeps the line count: a redacted multi-line secret (a private key block) leaves
    its line breaks after the marker, so line numbers into the text stay right.
    """
    if not text:
        return text, 0
    low = text.lower()
    total = 0
    for rule in _RULES:
        if rule.needles and not any(n in low for n in rule.needles):
            continue
        text, n = _apply(rule, text, keep_lines)
        total += n
    return text, total


def _apply(rule: _Rule, text: str, keep_lines: bool = False) -> tuple[str, int]:
    count = 0
    base_marker = MARKER.format(rule.kind)

    def marker_for(secret: str) -> str:
        return base_marker + "\n" * secret.count("\n") if keep_lines else base_marker

    def sub(match: re.Match[str]) -> str:
        nonlocal count
        if rule.group:
            value = match.group("v")
            if value.startswith(_ALREADY) or (rule.check and not rule.check(value)):
                return match.group(0)
            start, end = match.span("v")
            base = match.start()
            count += 1
            whole = match.group(0)
            return whole[: start - base] + marker_for(value) + whole[end - base :]
        value = match.group(0)
        if rule.check and not rule.check(value):
            return value
        count += 1
        return marker_for(value)

    return rule.pattern.sub(sub, text), count


def contains_secret(text: str) -> bool:
    """Whether :func:`redact` would change ``text``."""
    return redact(text)[1] > 0


__all__ = ["FINGERPRINT", "MARKER", "RULES_VERSION", "contains_secret", "redact"]
