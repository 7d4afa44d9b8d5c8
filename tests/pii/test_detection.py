"""What each entity type's recognizers find, in English and in Japanese text (label mode)."""

import pytest

from memory_service.pii.recognizers import my_number_is_valid

EMAIL = [
    ("Reach me at bob.smith+notes@mail.example.co.uk.", "Reach me at <EMAIL_ADDRESS>."),
    ("email=bob@example.com", "email=<EMAIL_ADDRESS>"),
    ("連絡先はtaro@example.jpまで", "連絡先は<EMAIL_ADDRESS>まで"),
    ("メール：hanako.yamada@example.co.jpへ送付", "メール：<EMAIL_ADDRESS>へ送付"),
]
PHONE = [
    ("Call me at (212) 555-0123 tomorrow.", "Call me at <PHONE_NUMBER> tomorrow."),
    ("US desk: +1 212 555 0123", "US desk: <PHONE_NUMBER>"),
    ("Tokyo office: +81 3-1234-5678", "Tokyo office: <PHONE_NUMBER>"),
    ("Call 090-1234-5678 after six.", "Call <PHONE_NUMBER> after six."),
    ("電話は090-1234-5678です", "電話は<PHONE_NUMBER>です"),
    ("携帯09012345678に連絡", "携帯<PHONE_NUMBER>に連絡"),
    ("代表03-1234-5678、FAX 03 1234 5679", "代表<PHONE_NUMBER>、FAX <PHONE_NUMBER>"),
    ("窓口(03) 1234-5678まで", "窓口<PHONE_NUMBER>まで"),
    ("フリーダイヤル0120-123-456、0800-123-4567", "フリーダイヤル<PHONE_NUMBER>、<PHONE_NUMBER>"),
    ("海外から+81 90-1234-5678へ", "海外から<PHONE_NUMBER>へ"),
    ("海外から+81 (0)90 1234 5678へ", "海外から<PHONE_NUMBER>へ"),
    ("大阪06-6123-4567の番号", "大阪<PHONE_NUMBER>の番号"),
]
CREDIT_CARD = [
    ("Test card 4111 1111 1111 1111 was charged.", "Test card <CREDIT_CARD> was charged."),
    ("カード番号は4111111111111111です", "カード番号は<CREDIT_CARD>です"),
]
IBAN = [
    ("Wire to IBAN GB82 WEST 1234 5698 7654 32 today.", "Wire to IBAN <IBAN_CODE> today."),
    ("口座はDE89370400440532013000です", "口座は<IBAN_CODE>です"),
]
IP = [
    (
        "The bastion is 203.0.113.7; the DB is 10.0.0.5:5432.",
        "The bastion is <IP_ADDRESS>; the DB is <IP_ADDRESS>:5432.",
    ),
    ("IPv6 2001:db8:85a3::8a2e:370:7334 answered", "IPv6 <IP_ADDRESS> answered"),
    ("サーバーは192.168.1.10です", "サーバーは<IP_ADDRESS>です"),
]
MY_NUMBER = [
    ("My Number: 1234-5678-9018", "My Number: <JP_MY_NUMBER>"),
    ("Her number is 1234 5678 9018.", "Her number is <JP_MY_NUMBER>."),
    ("マイナンバーは123456789018です", "マイナンバーは<JP_MY_NUMBER>です"),
]
POSTAL_CODE = [
    ("Postal code 100-0005, Tokyo", "Postal code <JP_POSTAL_CODE>, Tokyo"),
    ("〒100-0005 東京都", "〒<JP_POSTAL_CODE> 東京都"),
    ("郵便番号：530-0001", "郵便番号：<JP_POSTAL_CODE>"),
    ("〒1000005", "〒<JP_POSTAL_CODE>"),
]
ADDRESS = [
    ("Ship it to 大阪府大阪市北区梅田3丁目1番1号 by Friday.", "Ship it to <ADDRESS> by Friday."),
    ("HQ: 1600 Amphitheatre Parkway, Mountain View", "HQ: <ADDRESS>, Mountain View"),
    ("住所は東京都千代田区丸の内1-2-3です", "住所は<ADDRESS>です"),
    ("本社は横浜市西区みなとみらい2-2-1にあります", "本社は<ADDRESS>にあります"),
    ("北海道札幌市中央区北一条西二丁目1番地", "<ADDRESS>"),
]
SECRET = [
    ("AWS key AKIAIOSFODNN7EXAMPLE leaked", "AWS key <SECRET> leaked"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = <SECRET>"),
    ("token ghp_0123456789abcdefghijABCDEFGHIJ012345 works", "token <SECRET> works"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "<SECRET>"),
    ("GitLab glpat-abcdefghij0123456789 here", "GitLab <SECRET> here"),
    ("Slack bot xoxb-1234567890-abcdefghijkl", "Slack bot <SECRET>"),
    ("Post to https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXX now", "Post to <SECRET> now"),
    ("OPENAI_API_KEY=sk-proj-abc123def456ghi789jkl012mno345", "OPENAI_API_KEY=<SECRET>"),
    ("Anthropic sk-ant-api03-abcdefghijklmnop0123456789 here", "Anthropic <SECRET> here"),
    ("Maps AIzaSyA1234567890abcdefghijklmnopqrstuv key", "Maps <SECRET> key"),
    ("Stripe sk_live_51H8abcdefghijklmnop and rk_live_51H8abcdefghijklmnop", "Stripe <SECRET> and <SECRET>"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U ok",
        "jwt <SECRET> ok",
    ),
    (
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----\nend",
        "key:\n<SECRET>\nend",
    ),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA (cut)", "<SECRET>"),
    ("mysql://root:toor@localhost/db", "mysql://<SECRET>@localhost/db"),
    ("postgres://app:s3cr3t@db.example.com:5432/app", "postgres://<SECRET>@db.example.com:5432/app"),
    (
        "https://x-access-token:ghs_abcdefghijklmnopqrstuvwxyz0123456789@github.com/o/r.git",
        "https://<SECRET>@github.com/o/r.git",
    ),
    ("Authorization: Bearer abcdef1234567890abcdef", "Authorization: Bearer <SECRET>"),
    ('curl -H "Authorization: Basic dXNlcjpwYXNzd29yZA=="', 'curl -H "Authorization: Basic <SECRET>"'),
    ("password=hunter22", "password=<SECRET>"),
    ("DB_PASSWORD: p4ss", "DB_PASSWORD: <SECRET>"),
    ('{"client_secret": "s3cr3t value", "user": "x"}', '{"client_secret": "<SECRET>", "user": "x"}'),
    ("api_key='abc123' and apikey=zzz999", "api_key='<SECRET>' and apikey=<SECRET>"),
    ("pwd: swordfish passwd=letmein1", "pwd: <SECRET> passwd=<SECRET>"),
    (
        "secret=s3c token: t0k3n access_key=AK1 private_key=pk1",
        "secret=<SECRET> token: <SECRET> access_key=<SECRET> private_key=<SECRET>",
    ),
    ("--password=hunter22 --verbose", "--password=<SECRET> --verbose"),
    ("service token abcd1234.0123456789abcdefghijABCDEFGHIJ01 ok", "service token <SECRET> ok"),
    ("トークンはghp_0123456789abcdefghijABCDEFGHIJ012345です", "トークンは<SECRET>です"),
    ("パスワードはhunter22です", "パスワードは<SECRET>です"),
    ("DBのpassword: hunter22を変更", "DBのpassword: <SECRET>を変更"),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    EMAIL + PHONE + CREDIT_CARD + IBAN + IP + MY_NUMBER + POSTAL_CODE + ADDRESS + SECRET,
)
def test_it_masks_each_entity_type(masker, policy, text, expected):
    assert masker.mask(text, policy).text == expected


@pytest.mark.parametrize(
    ("text", "expected", "entity"),
    [
        ("０９０－１２３４－５６７８に電話", "<PHONE_NUMBER>に電話", "PHONE_NUMBER"),
        ("電話は０３ー１２３４ー５６７８", "電話は<PHONE_NUMBER>", "PHONE_NUMBER"),
        ("ａ＠ｂ．ｊｐ宛て", "<EMAIL_ADDRESS>宛て", "EMAIL_ADDRESS"),
        ("mail ali\u200bce@example.com now", "mail <EMAIL_ADDRESS> now", "EMAIL_ADDRESS"),
        ("call 090\u200b-1234-\u20605678", "call <PHONE_NUMBER>", "PHONE_NUMBER"),
        ("マイナンバー１２３４　５６７８　９０１８", "マイナンバー<JP_MY_NUMBER>", "JP_MY_NUMBER"),
        ("〒１００－０００５", "〒<JP_POSTAL_CODE>", "JP_POSTAL_CODE"),
        ("東京都千代田区丸の内１−２−３", "<ADDRESS>", "ADDRESS"),
        ("ｐａｓｓｗｏｒｄ＝ｈｕｎｔｅｒ２２", "ｐａｓｓｗｏｒｄ＝<SECRET>", "SECRET"),
        ("key AKIA\u200bIOSFODNN7EXAMPLE", "key <SECRET>", "SECRET"),
    ],
)
def test_it_masks_full_width_and_zero_width_variants_in_the_original_text(masker, policy, text, expected, entity):
    result = masker.mask(text, policy)

    assert result.text == expected
    assert result.counts == {entity: 1}


@pytest.mark.parametrize("number", ["123456789018", "111111111118", "000000000000", "987654321000"])
def test_it_accepts_my_numbers_with_a_valid_check_digit(number):
    assert my_number_is_valid(number)


@pytest.mark.parametrize("number", ["123456789012", "123456789019", "111111111111", "12345678901", "12345678901a"])
def test_it_rejects_my_numbers_with_an_invalid_check_digit(number):
    assert not my_number_is_valid(number)


def test_it_masks_a_my_number_only_when_its_check_digit_is_valid(masker, policy):
    assert masker.mask("マイナンバーは123456789018です", policy).text == "マイナンバーは<JP_MY_NUMBER>です"
    assert masker.mask("マイナンバーは123456789012です", policy).text == "マイナンバーは123456789012です"
    assert masker.mask("My Number 1234-5678-9012", policy).text == "My Number 1234-5678-9012"


@pytest.mark.parametrize(
    "text",
    [
        "a 13-digit order id 1234567890123",
        "build 20240115-3 of ticket 4521",
        "the 09:30-12:00 slot",
        "タイムアウト30秒、リトライ3回、上限1000件",
        "address book section 3-1",
        "password_hash = 'pbkdf2'",
        "Basic authentication is disabled",
        "sk-learn-style-identifier-without-digits",
        "react@18.2.0 and pkg@localhost",
    ],
)
def test_it_leaves_look_alikes_alone(masker, policy, text):
    assert masker.mask(text, policy).text == text
