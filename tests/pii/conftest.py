import pytest

from memory_service.pii import Masker, MaskingPolicy, get_masker


@pytest.fixture(scope="session")
def masker() -> Masker:
    """The process-wide masker (regex tier here: no NER model is installed in tests)."""
    return get_masker()


@pytest.fixture
def policy() -> MaskingPolicy:
    """Label mode, every entity type."""
    return MaskingPolicy(tenant_id="tenant-a")


@pytest.fixture
def pseudonym_policy() -> MaskingPolicy:
    return MaskingPolicy(tenant_id="tenant-a", mode="pseudonym", pseudonym_key=b"test-key")
