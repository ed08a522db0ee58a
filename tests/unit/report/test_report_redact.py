"""Nothing that looks like a token, key or password reaches a shared report."""

from __future__ import annotations

import copy

import pytest

from fp16doctor.report import render_html, render_markdown
from fp16doctor.report.redact import REDACTED, redact, redact_text

SECRETS = [
    "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "AKIAIOSFODNN7EXAMPLE",
    "hf_abcdefghijklmnopqrstuvwxyz0123456789",
    "sk-proj-abcdefghijklmnopqrstuvwx1234",
    "xoxb-1234567890-abcdefghijkl",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_token_shapes_are_redacted(secret):
    assert secret not in redact_text(f"error: auth with {secret} failed")


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("HF_TOKEN=abc123def", "abc123def"),
        ("WANDB_API_KEY: 0123abcd", "0123abcd"),
        ('{"password": "hunter2"}', "hunter2"),
        ("pip --index-url https://bob:s3cr3t@pypi.corp.example/simple", "s3cr3t"),
        ("fp16doctor diagnose --docker-host tcp://me:pw0rd@host:2376", "pw0rd"),
        ("curl --token abc.def.ghi", "abc.def.ghi"),
        ("Authorization: Bearer abcdefghijklmnop1234", "abcdefghijklmnop1234"),
        ("/home/me/.cache/x/q9Zr2LmN8vB4xK7pT1wY5sD3fG6hJ0aE", "q9Zr2LmN8vB4xK7pT1wY5sD3fG6hJ0aE"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
            "MIIEpAIBAAKCAQEA",
        ),
    ],
)
def test_secret_values_are_redacted(text, gone):
    out = redact_text(text)
    assert gone not in out and REDACTED in out


@pytest.mark.parametrize(
    "text",
    [
        "tensorflow/tensorflow:1.7.0-gpu-py3",
        "GPU-5f1c2b7e-1234-5678-9abc-def012345678",
        "sha256:" + "a1" * 32,
        "password authentication failed for user",
        "/usr/local/lib/python3.11/site-packages/tensorflow/python/framework/ops.py",
        "CUDA driver version is insufficient for CUDA runtime version",
        "unix:///var/run/docker.sock",
    ],
)
def test_ordinary_text_is_kept(text):
    assert redact_text(text) == text


def test_secret_named_keys_lose_their_value_whatever_it_is():
    doc = {"env": {"MY_PASSWORD": "x", "SECRET_THING": 42, "PATH": "/usr/bin"}, "list": ["token=abc"]}
    out = redact(doc)
    assert out["env"]["MY_PASSWORD"] == REDACTED and out["env"]["SECRET_THING"] == REDACTED
    assert out["env"]["PATH"] == "/usr/bin"
    assert out["list"] == [f"token={REDACTED}"]
    assert doc["env"]["MY_PASSWORD"] == "x"  # the input is not changed


def test_no_secret_survives_into_html_or_markdown(rich_doc):
    doc = copy.deepcopy(rich_doc)
    doc["host"]["os"] = "Ubuntu 22.04 " + SECRETS[0]
    doc["runs"][0]["error"] = f"pull failed: {SECRETS[2]}"
    doc["runs"][0]["status"] = "failed"
    doc["runs"][0]["software"]["env"]["AWS_SECRET_ACCESS_KEY"] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    doc["runs"][3]["engine"]["image"] = "registry.example/img:1?token=zzzsecretzzz"
    for text in (render_html([doc]), render_markdown([doc])):
        for secret in (
            *SECRETS[:1],
            SECRETS[2],
            "hf_abcdefghijklmnopqrstuvwxyz0123456789",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "zzzsecretzzz",
            "s3cretpassw0rd",
            "hunter2",
        ):
            assert secret not in text, secret
