"""Watch-only wallets (derived deposit addresses) and the chain watchers' pass."""

from __future__ import annotations

import datetime
import socket
from collections.abc import Iterator
from decimal import Decimal

import pytest

import coinorder

# The BIP84 test vector: the zpub of account 0 of the mnemonic "abandon ... about" and its
# first two receive addresses (m/84'/0'/0'/0/0 and /1).
ZPUB = "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs"
ADDRESS_0 = "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"
ADDRESS_1 = "bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g"
# The BIP32 test vector 1 master private key: never to be taken as a wallet.
XPRV = "xprv9s21ZrQH143K3GJpoapnV8SFfukcVBSfeCficPSGfubmSFDxo1kuHnLisriDvSnRRuL2Qrg5ggqHKNVpxR86QEC8w35uxmGoggxtQTPvfUu"


@pytest.fixture
def live(db_path: str) -> Iterator[coinorder.Service]:
    """A live service (mainnet keys) without a rate limit."""
    with coinorder.Service.open(db_path, "live", rate_limit=0, synchronous="normal") as service:
        yield service


def closed_port() -> int:
    """A loopback port nothing listens on (bound, read, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_set_wallet_derives_the_bip84_vector(live: coinorder.Service) -> None:
    wallet = live.set_wallet("BTC", ZPUB)
    assert isinstance(wallet, coinorder.Wallet)
    assert wallet.coin == "BTC"
    assert wallet.first_address == ADDRESS_0
    assert wallet.next_index == 0
    assert wallet.descriptor.startswith("wpkh(")
    assert isinstance(wallet.created_at, datetime.datetime)
    assert wallet.created_at.tzinfo is not None
    assert wallet.updated_at >= wallet.created_at
    assert set(wallet.to_dict()) == {"coin", "descriptor", "next_index", "first_address", "created_at", "updated_at"}
    assert repr(wallet).startswith("Wallet(coin='BTC', ")
    assert live.wallet_address("BTC") == ADDRESS_0
    assert live.wallet_address("BTC", 1) == ADDRESS_1
    assert live.wallet_address("btc", index=1) == ADDRESS_1  # the coin's case does not matter


def test_orders_get_derived_addresses_in_turn(live: coinorder.Service) -> None:
    live.set_wallet("BTC", ZPUB)
    live.set_rate("BTC", "USD", Decimal("50000"))
    merchant = live.authenticate(live.create_key(1).plain_key)

    first = live.create_order(merchant, currency="USD", amount=Decimal("100"), pay_currency="BTC")
    assert first.invoice.currency == "BTC"
    assert first.invoice.address == ADDRESS_0
    assert first.invoice.derivation_index == 0
    assert ADDRESS_0 in first.invoice.payment_uri
    stored = live.get_order(merchant, first.order.order_id).invoice
    assert (stored.address, stored.derivation_index) == (ADDRESS_0, 0)
    assert stored.to_dict()["derivation_index"] == 0

    second = live.create_order(merchant, currency="USD", amount=Decimal("100"), pay_currency="BTC")
    stored = live.get_order(merchant, second.order.order_id).invoice
    assert (stored.address, stored.derivation_index) == (ADDRESS_1, 1)
    assert [w.next_index for w in live.wallets()] == [2]


def test_an_invoice_without_a_wallet_has_no_derivation_index(
    svc: coinorder.Service, merchant: coinorder.Merchant
) -> None:
    created = svc.create_order(merchant, currency="USD", amount=Decimal("10"), pay_currency="BTC")
    assert created.invoice.derivation_index is None
    assert svc.get_order(merchant, created.order.order_id).invoice.to_dict()["derivation_index"] is None


def test_a_private_key_is_refused_without_echoing_it(live: coinorder.Service) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        live.set_wallet("BTC", XPRV)
    assert caught.value.message.startswith("wallet: ")
    assert caught.value.http_status == 400
    assert XPRV not in caught.value.message
    assert XPRV[4:20] not in str(caught.value)
    assert live.wallets() == []


def test_an_unknown_coin_is_refused(live: coinorder.Service) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        live.set_wallet("DOGE", ZPUB)
    assert caught.value.message.startswith("coin: ")


def test_list_and_remove_wallets(live: coinorder.Service) -> None:
    assert live.wallets() == []
    set_ = live.set_wallet("BTC", ZPUB)
    listed = live.wallets()
    assert [w.coin for w in listed] == ["BTC"]
    assert listed[0].to_dict() == set_.to_dict()

    assert live.remove_wallet("BTC") is True
    assert live.remove_wallet("BTC") is False
    assert live.wallets() == []
    with pytest.raises(coinorder.ParametersMissing) as caught:
        live.wallet_address("BTC", 0)
    assert caught.value.message.startswith("coin: ")


def test_watch_chain_due_without_a_chain_reports_nothing(svc: coinorder.Service) -> None:
    report = svc.watch_chain_due()
    assert isinstance(report, coinorder.ChainWatchReport)
    assert (report.recorded, report.confirmed, report.rejected) == (0, 0, 0)
    assert report.backing_off == []
    assert report.errors == []
    assert report.to_dict() == {"recorded": 0, "confirmed": 0, "rejected": 0, "backing_off": [], "errors": []}


def test_watch_chain_due_reports_a_dead_endpoint_without_its_secrets(db_path: str) -> None:
    url = f"http://u:hunter2@127.0.0.1:{closed_port()}/KEY123"
    with coinorder.Service.open(db_path, "live", rate_limit=0, esplora_url=url, bitcoin_confirmations=1) as live:
        report = live.watch_chain_due()
        assert (report.recorded, report.confirmed, report.rejected) == (0, 0, 0)
        assert report.backing_off == []
        assert len(report.errors) == 1, report.errors
        error = report.errors[0]
        assert error.startswith("bitcoin: ")
        assert "hunter2" not in error
        assert "KEY123" not in error

        again = live.watch_chain_due()
        assert again.backing_off == ["bitcoin"]
        assert again.errors == []


def test_ethereum_options_pass_through(db_path: str) -> None:
    url = f"http://127.0.0.1:{closed_port()}/"
    tokens = {"USDT": "0x" + "ab" * 20}
    with coinorder.Service.open(
        db_path, "live", rate_limit=0, ethereum_rpc_url=url, ethereum_confirmations=3, ethereum_tokens=tokens
    ) as live:
        report = live.watch_chain_due()
        assert [error.split(":", 1)[0] for error in report.errors] == ["ethereum"]


def test_ethereum_tokens_must_map_str_to_str(db_path: str) -> None:
    with pytest.raises(TypeError, match="ethereum_tokens: must be a dict of str to str"):
        coinorder.Service.open(db_path, ethereum_rpc_url="http://127.0.0.1:8545", ethereum_tokens={"USDT": 1})


def test_ethereum_confirmations_needs_a_node(db_path: str) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        coinorder.Service.open(db_path, ethereum_confirmations=3)
    assert caught.value.message.startswith("config.ethereum_confirmations: ")


def test_bitcoin_confirmations_needs_esplora(db_path: str) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        coinorder.Service.open(db_path, bitcoin_confirmations=3)
    assert caught.value.message.startswith("config.bitcoin_confirmations: ")
