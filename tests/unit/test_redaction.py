"""Redaction: every secret shape in the one table is caught, ordinary log lines pass unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainguard.redaction import REDACTED, SECRET_SHAPES, bound, redact

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "triage"

# Fake credentials, shaped like the real ones (the prefixes and lengths their issuers document).
GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt\n"
    "0gBhqvDu1zDG3c1pM9E0kH4uOGmQWd6mo6ck\n-----END RSA PRIVATE KEY-----"
)
PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF8f2rMBCADQ1b8tq0mEo1pZt5nT4KXa\n=x1Yz\n"
    "-----END PGP PRIVATE KEY BLOCK-----"
)

# (shape name, text, what must not survive, what must survive)
CASES = [
    (
        "PEM/PGP private key block",
        f"key:\n{PEM}\nnext line",
        ["MIIEowIBAAKCAQEA", "0gBhqvDu1zDG"],
        ["key:", "next line"],
    ),
    (
        "PEM/PGP private key block",
        f"export:\n{PGP}\ndone",
        ["lQOYBF8f2rMBCADQ", "=x1Yz"],
        ["export:", "done"],
    ),
    (
        "PEM/PGP private key block",
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B\\n-----END PRIVATE '
        'KEY-----\\n"}',
        ["MIIEvQIBADANBgkqhkiG9w0B"],
        ['"private_key"'],
    ),
    ("Authorization header", "Authorization: Bearer abc.def-ghi", ["abc.def-ghi"], ["Authorization"]),
    ("Authorization header", "authorization=Basic dXNlcjpwYXNz", ["dXNlcjpwYXNz"], []),
    ("Authorization header", "Proxy-Authorization: Basic Zm9vOmJhcg==", ["Zm9vOmJhcg"], ["Proxy"]),
    (
        "Cookie / Set-Cookie header",
        "Cookie: SID=31d4d96e407aad42; lang=en-US",
        ["31d4d96e407aad42", "lang"],
        ["Cookie:"],
    ),
    (
        "Cookie / Set-Cookie header",
        "Set-Cookie: __Secure-3PSID=g.a000lQhSAMPLE; Path=/; Secure",
        ["g.a000lQhSAMPLE"],
        ["Set-Cookie:"],
    ),
    ("Cookie in JSON or a parameter", '{"cookie": "session=9f8e7d6c5b4a"}', ["9f8e7d6c5b4a"], ['"cookie"']),
    ("Bearer token", "sent bearer 1a2b3c4d5e6f7g8h9i0j to the API", ["1a2b3c4d5e6f7g8h9i0j"], ["to the API"]),
    (
        "URL credentials",
        "could not connect to postgres://trainer:s3cr3t-Pa55@db.internal:5432/runs",
        ["s3cr3t-Pa55"],
        ["postgres://trainer:", "@db.internal:5432/runs"],
    ),
    (
        "URL credentials",
        "pip install from https://__token__:pypi-AgEIcHlwaS5vcmc@pypi.example/simple",
        ["pypi-AgEIcHlwaS5vcmc"],
        ["pypi.example/simple"],
    ),
    ("Google OAuth access token", "token ya29.a0AfB_byDx9Kq3Lz used", ["ya29.a0AfB"], ["used"]),
    (
        "Google OAuth refresh token",
        "refresh with 1//0gLmNoPqRsTuVwXyZ-abcdefghijk now",
        ["1//0gLmNo"],
        ["now"],
    ),
    ("Google API key", "key AIzaSyA1234567890abcdefghijklmnopqrstuv used", ["AIzaSy"], ["used"]),
    ("JSON Web Token", "id eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl ok", ["eyJhbGci"], ["ok"]),
    ("GitHub token", f"git clone https://{GH}@github.com/org/repo", [GH[4:]], ["github.com/org/repo"]),
    (
        "GitHub token",
        "GITHUB_TOKEN github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
        ["github_pat_11ABC", "abcdefghijklmnop"],
        [],
    ),
    (
        "Slack token",
        "posting with xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        ["xoxb-1234", "AbCdEfGh"],
        ["posting with"],
    ),
    (
        "Slack webhook",
        "webhook https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX failed",
        ["T000/B000", "XXXXXXXX"],
        ["failed"],
    ),
    (
        "AWS access key pair",
        f"aws keys {AWS_ID} {AWS_SECRET} loaded",
        [AWS_ID, AWS_SECRET],
        ["aws keys", "loaded"],
    ),
    ("secret key=value", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", [AWS_SECRET], ["AWS_SECRET_ACCESS_KEY"]),
    ("secret key=value", f"aws_access_key_id = {AWS_ID}", [AWS_ID], ["aws_access_key_id"]),
    (
        "secret key=value",
        '{"type": "service_account", "private_key_id": "8f1e2d3c4b5a69788796a5b4c3d2e1f0"}',
        ["8f1e2d3c4b5a"],
        ['"private_key_id"', "service_account"],
    ),
    (
        "secret key=value",
        "https://storage.googleapis.com/b/o?X-Goog-Signature=0a1b2c3d4e&X-Goog-Date=2026",
        ["0a1b2c3d4e"],
        ["X-Goog-Date=2026"],
    ),
    ("secret key=value", '{"access_token": "ya29.c.b0Aaekm1K"}', ["ya29.c"], ['"access_token"']),
    ("secret key=value", "password=hunter2", ["hunter2"], ["password="]),
    ("secret key=value", "client_secret: GOCSPX-abcdefghijklmnop", ["GOCSPX-abcdefgh"], ["client_secret"]),
    (
        "secret key=value",
        "redirect?next=%2Fhome&access_token%3Dabcd1234efgh5678%26state%3Dxyz",
        ["abcd1234efgh5678"],
        ["%26state%3Dxyz"],
    ),
    (
        "secret key=value",
        "body=%7B%22api_key%22%3A%22sk-live-0123456789abcdef%22%7D",
        ["sk-live-0123456789abcdef"],
        ["%22api_key%22"],
    ),
    (
        "Authorization header",
        "header%3A%20Authorization%3A%20Bearer%20tok_0123456789abcdef",
        ["tok_0123456789abcdef"],
        [],
    ),
    # Shapes that leaked before this round: an "@" or nothing as the URL's user, argv flags,
    # a prefix glued to PASSWORD, Hugging Face and OpenAI keys.
    ("URL credentials", "redis://:r3d1sPass@cache:6379/0", ["r3d1sPass"], ["@cache:6379/0"]),
    (
        "URL credentials",
        "https://bob:p@ss#w0rd@proxy.corp:3128/ up",
        ["p@ss", "w0rd"],
        ["https://bob:", "@proxy.corp:3128/ up"],
    ),
    (
        "secret key=value",
        "exec python train.py --hf-token=abc123DEF --lr=0.1",
        ["abc123DEF"],
        ["--hf-token=", "--lr=0.1"],
    ),
    ("secret key=value", "PGPASSWORD=hunter2 psql -h db", ["hunter2"], ["psql -h db"]),
    (
        "secret command-line flag",
        "argv: train.py --password hunter2 --epochs 3",
        ["hunter2"],
        ["--password", "--epochs 3"],
    ),
    ("secret command-line flag", "--wandb-api-key 0123abcd --seed 1", ["0123abcd"], ["--seed 1"]),
    (
        "Hugging Face token",
        "HF login with hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 ok",
        ["aBcDeFgHiJkLmNoP"],
        ["ok"],
    ),
    ("OpenAI API key", "key sk-proj-" + "aB3" * 16 + " rejected", ["aB3aB3aB3"], ["rejected"]),
    # Issue 29's shapes: a random value after a secret-like word (no "=" or ":" between), a URL
    # password holding "/", tokens glued to a word, PEM blocks broken across lines, JWTs.
    ("random value after a secret word", f"aws secret {AWS_SECRET}", [AWS_SECRET], ["aws secret"]),
    (
        "random value after a secret word",
        f"AWS Secret Access Key [None]: {AWS_SECRET}\nDefault region name [None]: us-east-1",
        [AWS_SECRET, "bPxRfiCY"],
        ["Secret Access Key [None]:", "us-east-1"],
    ),
    (
        "random value after a secret word",
        "the api token is 9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c, rotate it",
        ["9f8e7d6c5b4a"],
        ["the api token is", "rotate it"],
    ),
    (
        "URL credentials",
        "https://bob:p4ss/w0rd@host.example:443/x",
        ["p4ss", "w0rd"],
        ["@host.example:443/x"],
    ),
    ("GitHub token", f"export TOKEN{GH}", [GH[4:]], ["export TOKEN"]),
    ("Google OAuth access token", "sent tokenya29.a0AfB_byDx9Kq3Lz twice", ["a0AfB_by"], ["twice"]),
    ("AWS access key pair", f"id={AWS_ID}/key{AWS_ID}", [AWS_ID], ["id="]),
    (
        "Hugging Face token",
        "HUGGING_FACE_HUB_TOKENhf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        ["aBcDeFgHiJkLmNoP"],
        ["HUGGING_FACE_HUB_TOKEN"],
    ),
    (
        "JSON Web Token",
        "auth=Bearer_eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl end",
        ["eyJhbGci", "c2lnbmF0dXJl"],
        ["end"],
    ),
    (
        "JSON Web Token",
        "idtokeneyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl end",
        ["eyJhbGci", "eyJzdWIi"],
        ["idtoken", "end"],
    ),
    (
        "PEM/PGP private key block",
        "-----BEGIN RSA PRIVATE\nKEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt\n"
        "-----END RSA\nPRIVATE KEY-----\nafter",
        ["MIIEowIBAAKCAQEA"],
        ["after"],
    ),
    (
        "PEM private key tail",
        "[workerpool0-0] MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcw\n[workerpool0-0] 0gBhqvDu1zDG3c1pM9E0kH4uOGmQ\n"
        "[workerpool0-0] -----END PRIVATE KEY-----\n[workerpool0-0] step 5",
        ["MIIEvQIBADANBgkq", "0gBhqvDu1zDG"],
        ["step 5"],
    ),
    (
        "PEM private key tail",
        '"MIIEvQIBADANBgkqhkiG9w0B\\nAbCdEf0123456789+/abcd\\n-----END PRIVATE KEY-----\\n"}',
        ["MIIEvQIBADANBgkq", "AbCdEf0123456789"],
        ['"}'],
    ),
]


@pytest.mark.parametrize("name,text,leaks,kept", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_secret_shape_is_redacted(name, text, leaks, kept):
    cleaned = redact(text)

    assert REDACTED in cleaned or "[REDACTED PRIVATE KEY]" in cleaned
    for leak in leaks:
        assert leak not in cleaned, f"{name}: {leak!r} survived in {cleaned!r}"
    for part in kept:
        assert part in cleaned, f"{name}: {part!r} was lost from {cleaned!r}"
    # The shape named is the one that catches it (the others alone leave something behind or
    # the named one redacts on its own).
    shape = next(s for s in SECRET_SHAPES if s.name == name)
    assert shape.regex.search(text), f"{name} does not match {text!r}"


def test_every_shape_in_the_table_has_a_case():
    assert {s.name for s in SECRET_SHAPES} == {c[0] for c in CASES}


ORDINARY = [
    "epoch 3/10 step 1200/5000 loss=0.2345 val_loss=0.31 lr=3e-4 grad_norm=1.02",
    "saved checkpoint gs://my-bucket/runs/r1/checkpoints/step-1200 (sha256 9f8e7d6c5b4a39281706f5e4d3c2b1a0)",
    "100/100 [==============================] - 328s 3s/step - loss: 0.2445 - val_loss: 0.2342",
    "tokens/s: 51234.5 tokens_per_step=4096 num_tokens: 1048576 max_tokens=2048",
    "Downloading https://huggingface.co/bert-base-uncased/resolve/main/config.json",
    "key_value_cache: 12.0 GiB; keys=32 monkey=7 secretary of state",
    'File "/opt/conda/lib/python3.10/site-packages/torch/nn/functional.py", line 2567, in embedding',
    "NCCL INFO comm 0x7f1928e6e060 rank 3 nRanks 4 nNodes 1 localRanks 4 localRank 3 MNNVL 0",
    "Using authorization mode ADC for project my-project; cookies disabled",
    "bearer tokens are not logged",
    "fetched https://storage.googleapis.com:443/b/runs/bob@example.com/log.txt",
    "ssh://git@github.com:org/repo.git and mail bob@example.com",
    "python train.py --max-tokens 2048 --token-budget 5 --secretary-mode on",
    "hf_hub_download(repo_id='bert-base-uncased') sk-learn tasks: 3",
    # Hashes and ids are content addresses, not secrets: in a path, a commit, a run id, a disk
    # name they stay (after a secret-like word a hex run is redacted: see CASES).
    "saved gs://my-bucket/runs/9f8e7d6c5b4a39281706f5e4d3c2b1a0/model.pt",
    "commit 5784cec9ab3898c5d572c063b35014cd76535a59 (HEAD -> main)",
    "run id 123e4567-e89b-12d3-a456-426614174000 on disk-0123456789abcdef0123456789abcdef0",
    "step=123456789012345678 loss=0.1234 tokens=4096 token 7 of 512",
    "fetched https://registry.npmjs.org:443/@scope/pkg",
    "Secret Manager API secretmanager.googleapis.com enabled for the secrets of run 20250101",
    "using credentials file /home/User1/.config/gcloud/application_default_credentials.json",
    "INFO:absl:  name = bert/embeddings/token_type_embeddings:0, shape = (2, 768), *INIT_FROM_CKPT*",
    # argparse's usage line names a flag's metavar, not its value.
    "usage: train.py [--eos-token EOS_TOKEN] [--hf-token HF_TOKEN] [--password PASSWORD]",
]


@pytest.mark.parametrize("line", ORDINARY)
def test_ordinary_log_lines_are_not_redacted(line):
    assert redact(line) == line


def test_the_real_healthy_logs_pass_unchanged():
    paths = [*FIXTURES.glob("unknown-healthy-*.txt"), *FIXTURES.glob("logs/*.txt")]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert redact(text) == text, path.name


def test_the_real_error_texts_lose_nothing_but_secrets():
    # 375 published error texts (tests/fixtures/triage/corpus): none holds a credential, and a
    # word like "credentials ... for my-bucket/lambda-github-workflow-trigger.zip" or argparse's
    # "--eos-token EOS_TOKEN" must not read as one.
    from tests.triage_corpus import SPLITS, load

    for split in SPLITS:
        for entry in load(split):
            assert redact(entry.text) == entry.text, entry.id


@pytest.mark.parametrize(
    ("value", "random"),
    [
        ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", True),  # AWS's documented example secret
        ("9f8e7d6c5b4a39281706f5e4d3c2b1a0", True),  # a hex token
        ("my-bucket/lambda-github-workflow-trigger.zip", False),  # a path
        ("/home/User1/.config/gcloud/adc.json", False),
        ("token_type_embeddings", False),  # a name
        ("1234567890123456789", False),  # a number
        ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1A", False),  # too few kinds of character
        ("Ab1Ab1", False),  # too short
    ],
)
def test_a_value_looks_random_when_it_is_long_mixed_and_spread(value, random):
    from trainguard.redaction import looks_random

    assert looks_random(value) is random


def test_an_unterminated_private_key_is_redacted_to_the_end():
    cleaned = redact("boom\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nmore")

    assert cleaned == "boom\n[REDACTED PRIVATE KEY]"


def test_terminal_control_characters_are_shown_as_escapes():
    from trainguard.redaction import printable

    hostile = "loss\x1b[1A\x1b[2K\rPASSED\x1b]0;title\x07 \u202eevil\x9b"
    shown = printable(hostile)
    assert not any(
        ord(c) < 32
        and c not in "\t\n"
        or 0x7F <= ord(c) <= 0x9F
        or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
        for c in shown
    )
    assert shown == "loss\\x1b[1A\\x1b[2K\\rPASSED\\x1b]0;title\\x07 \\u202eevil\\x9b"
    assert printable("a\tb\nc") == "a\tb\nc" and printable("a\nb", one_line=True) == "a\\nb"
    assert printable("plain text, ünïcödé ✓") == "plain text, ünïcödé ✓"


@pytest.mark.parametrize("limit", [1, 10, 40, 41, 80, 20_000])
def test_bound_keeps_every_text_within_its_limit(limit: int) -> None:
    # echo(name, 40) quotes column names in notes: a 100,000-character name must not pass whole.
    text = "v" * 100_000
    assert len(bound(text, limit)) <= limit
    assert bound("short", limit) == "short" or len("short") > limit
