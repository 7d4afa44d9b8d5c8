"""Harmless code strings stay as they are; secrets are never allow-listed."""

import pytest

from memory_service.pii.allowlist import harmless_spans, label_spans

HARMLESS = [
    "Bump the version to 1.2.3 before tagging.",
    "Released v2.0.1-rc1 yesterday; v2.0.1 follows next week.",
    "Fixed in commit a1b2c3d, see 9fceb02d0ae598e95dc970b74767f19372d61af8 for the revert.",
    "request id 550e8400-e29b-41d4-a716-446655440000 failed twice",
    "Postgres listens on :5432 and Redis on :6379.",
    "Run the dev server on port 8080.",
    "Open http://localhost:3000/dashboard after npm start.",
    "Deployed at 2024-01-15T10:30:00Z and rolled back at 2024-01-15T11:05:42.123+09:00.",
    "Standup moved to 2024-01-15 10:30.",
    "Pin numpy==1.26.4 and django>=5.2,<6.",
    "Requires python 3.11.9 and node v20.11.0.",
    "npm install react@18.2.0 react-dom@18.2.0",
    "docker run -p 8080:80 nginx:1.25.3",
    "redis://localhost:6379/0 is the broker URL.",
    "postgres://localhost:5432/memory has no password in dev.",
    "Bind to 127.0.0.1:8000 locally and 0.0.0.0:8000 in the container.",
    "IPv6 loopback is [::1]:8080.",
    "The job exited with code 137 after 30s.",
    "Retry after 1500 ms, at most 5 times.",
    "max_connections = 100, shared_buffers = 128MB",
    "Set max_tokens=4096 and temperature=0.2.",
    "image digest sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "chmod 0755 scripts/deploy.sh",
    "Traceback points at app/views.py:1234 in handle().",
    "cron schedule 0 3 * * * runs nightly.",
    "The epoch was 1705314600 (seconds) and 1705314600000 (ms).",
    "Merged PR #1234, closes issue #4521.",
    "JIRA ticket MEM-1234 tracks the migration.",
    "Patch CVE-2024-12345 in openssl 3.0.13.",
    "Windows build 10.0.19041.1 and kernel 5.15.0-91-generic.",
    "semver range ^1.2.0 || ~2.3.4",
    "ulimit -n 65536",
    "replicas: 3, memory: 512Mi, cpu: 500m",
    'HTTP/1.1 200 OK with ETag W/"5e8f-1a2b3c"',
    "Pointer 0x7ffee4b8c9a0 was freed twice.",
    "Netmask 255.255.255.0, CIDR /24.",
    "Allow 10.0.0.0/8, 172.16.0.0/12 and 192.168.0.0/16 in the security group.",
    "Log line 2024/01/15 10:30:45 INFO started",
    "Timezone is UTC+09:00; the window is 10:30-11:45.",
    "git clone git@github.com:acme/memory-service.git",
    "The role is arn:aws:iam::123456789012:role/Deploy.",
    "password_min_length = 12 and token_ttl: 3600",
    "Use settings.SECRET_KEY; never hard-code it.",
    "password: ${DB_PASSWORD} comes from the environment.",
    "api_key: str = Field(...)",
    "The token expired; refresh it with the CLI.",
    "Basic authentication is disabled; Bearer tokens are required.",
    "Call get_password() only inside the vault client.",
    "PWD=/home/app/src",
    "UUIDs like 123e4567-e89b-12d3-a456-426614174000 are fine.",
    "Go 1.22 and Rust 1.75.0 are installed.",
    "Averages: p50 12ms, p99 250ms over 86400 requests.",
    "バージョン1.2.3をリリースしました。",
    "コミットa1b2c3dで修正済み。",
    "ポート5432で待ち受けています。",
    "2024年1月15日 10時30分にデプロイ。",
    "リクエストID 550e8400-e29b-41d4-a716-446655440000 を確認。",
    "タイムアウトは30秒、リトライは3回です。",
    "localhost:3000で動作確認済み。",
    "ビルド番号20240115-3を参照。",
    "Pythonは3.11.9、Djangoは5.2を使用。",
]


def test_it_has_enough_harmless_examples():
    assert len(HARMLESS) >= 40


@pytest.mark.parametrize("text", HARMLESS)
def test_it_leaves_harmless_code_strings_unchanged(masker, policy, text):
    result = masker.mask(text, policy)

    assert result.text == text
    assert result.counts == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=deadbeef1234", "password=<SECRET>"),
        ("token: 550e8400-e29b-41d4-a716-446655440000", "token: <SECRET>"),
        ("api_key=2024-01-15T10:30:00Z", "api_key=<SECRET>"),
        ("secret: v1.2.3", "secret: <SECRET>"),
    ],
)
def test_it_never_allow_lists_a_secret(masker, policy, text, expected):
    assert masker.mask(text, policy).text == expected


def test_it_still_masks_pii_next_to_harmless_strings(masker, policy):
    text = "v1.2.3 deployed by bob@example.com from 203.0.113.7:8080 at 2024-01-15 10:30, ring 090-1234-5678"

    result = masker.mask(text, policy)

    assert result.text == (
        "v1.2.3 deployed by <EMAIL_ADDRESS> from <IP_ADDRESS>:8080 at 2024-01-15 10:30, ring <PHONE_NUMBER>"
    )


def test_it_finds_harmless_spans():
    text = "v2.0.1 at 2024-01-15T10:30:00Z on :5432, commit 9fceb02"

    found = {text[start:end] for start, end in harmless_spans(text)}

    assert {"v2.0.1", "2024-01-15T10:30:00Z", ":5432", "9fceb02"} <= found


def test_it_finds_labels_and_pseudonyms_but_not_other_angle_brackets():
    text = "<EMAIL_ADDRESS> <PHONE_NUMBER_0123456789ab> <div> <SECRET_xyz>"

    assert [text[start:end] for start, end in label_spans(text)] == ["<EMAIL_ADDRESS>", "<PHONE_NUMBER_0123456789ab>"]
