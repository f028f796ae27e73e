"""The console in a real browser (headless Chromium driven by Selenium) against a running
minibroker cluster: every page loads without a console error, a topic made and a message produced
through the forms are found, the lag chart rises and falls, a KIP-253 expansion shows its steps.
Screenshots of each page go to tests/console/screenshots/ (not committed)."""
from __future__ import annotations

import asyncio
import pathlib
import time

import pytest

from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from minibroker.console.server import ThreadedConsole
from minibroker.testing.threaded import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(180)]
SCREENSHOTS = pathlib.Path(__file__).parent / "screenshots"     # made by the browser fixture


@pytest.fixture(scope="module")
def cluster():
    with ThreadedCluster(brokers=3, group_initial_rebalance_delay_ms=0) as c:
        c.create_topic("orders", partitions=3, replication_factor=2)
        yield c


@pytest.fixture(scope="module")
def console(cluster):
    with ThreadedConsole(cluster.bootstrap) as con:
        yield con


def errors(driver) -> list[str]:
    """SEVERE browser log entries since the last call (reading drains the log)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def wait_for(driver, check, what: str, timeout: float = 20.0):
    """check(driver) until truthy; the live parts re-render every second, so an element found
    a moment ago may be gone: those errors only mean "not yet"."""
    from selenium.common.exceptions import (NoSuchElementException,
                                            StaleElementReferenceException)
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = check(driver)
            if value:
                return value
        except (NoSuchElementException, StaleElementReferenceException) as e:
            last = e
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} ({last!r}) on {driver.current_url}")


def text_of(driver, css: str) -> str:
    from selenium.webdriver.common.by import By
    return driver.find_element(By.CSS_SELECTOR, css).text


def open_page(driver, url: str, shot: str | None = None) -> None:
    driver.get(url)
    assert "Traceback" not in driver.page_source
    if shot:
        time.sleep(1.2)            # one live refresh, so a refresh error would show in the log
        driver.save_screenshot(str(SCREENSHOTS / f"{shot}.png"))


def run(coro):
    return asyncio.run(coro)


async def _produce(bootstrap: str, topic: str, n: int) -> None:
    async with Producer(bootstrap, linger_ms=5) as p:
        futs = [p.send(topic, f"v{i}".encode(), key=f"k{i}".encode()) for i in range(n)]
        await asyncio.gather(*futs)


async def _produce_one(bootstrap: str, topic: str, partition: int, value: bytes) -> None:
    async with Producer(bootstrap) as p:
        await p.send(topic, value, partition=partition)


async def _consume(bootstrap: str, topic: str, group: str, until: int) -> None:
    """Join `group`, read until `until` records were read (0: just join), commit, leave."""
    c = Consumer(bootstrap, group_id=group, auto_offset_reset="earliest",
                 enable_auto_commit=False)
    c.subscribe([topic])
    try:
        got, deadline = 0, time.monotonic() + 30
        while time.monotonic() < deadline:
            got += len(await c.poll(0.5))
            if c.assignment() and got >= until and all(
                    [await c.position(tp) is not None for tp in c.assignment()]):
                break
        await c.commit()
    finally:
        await c.close()


def test_every_page_loads_without_a_console_error(browser, console, cluster):
    run(_produce(cluster.bootstrap, "orders", 5))
    run(_consume(cluster.bootstrap, "orders", "billing", 5))
    errors(browser)
    pages = [("cluster", "/cluster", "#brokers"), ("topics", "/topics", "#topics"),
             ("topic", "/topics/orders", "#partitions"),
             ("messages", "/topics/orders/messages?partition=0", "#records"),
             ("messages-index", "/messages", "#topics"),
             ("groups", "/groups", "#groups"), ("group", "/groups/billing", "#lag"),
             ("changes", "/changes/orders", "#change-partitions"),
             ("transactions", "/transactions", "#transactions")]
    for shot, path, table in pages:
        open_page(browser, console.url + path)
        wait_for(browser, lambda d: text_of(d, table), f"{table} on {path}")
        open_page(browser, console.url + path, shot)
        assert errors(browser) == [], path
    open_page(browser, console.url + "/cluster")
    assert "active controller" in text_of(browser, "#brokers")
    assert "minibroker" in text_of(browser, ".summary")
    open_page(browser, console.url + "/groups")
    assert "billing" in text_of(browser, "#groups")


def test_the_read_only_pages_work_with_javascript_off(browser, console):
    browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        for path, table, text in [("/cluster", "#brokers", "active controller"),
                                  ("/topics/orders", "#partitions", "high_watermark"),
                                  ("/topics/orders/messages?partition=0", "#records", "Offset"),
                                  ("/groups/billing", "#lag", "orders"),
                                  ("/changes/orders", "#change-partitions", "initial")]:
            open_page(browser, console.url + path)
            assert text in text_of(browser, table), path
        open_page(browser, console.url + "/groups/billing")
        drawn = browser.execute_cdp_cmd("Runtime.evaluate", {
            "expression": "typeof window.lagChart === 'object'"})["result"]["value"]
        assert drawn is False                                           # lag_chart.js did not run
    finally:
        browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})


def test_a_topic_made_and_a_message_produced_in_the_browser_are_found(browser, console):
    from selenium.webdriver.common.by import By
    open_page(browser, console.url + "/topics")
    browser.find_element(By.ID, "new-topic-name").send_keys("made-in-browser")
    browser.find_element(By.ID, "new-topic-partitions").send_keys("2")
    browser.find_element(By.ID, "create-topic-submit").click()
    wait_for(browser, lambda d: text_of(d, "#topic-name") == "made-in-browser", "the topic page")
    assert "topic made-in-browser created" in text_of(browser, "#message")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#partitions tr")) == 1 + 2

    open_page(browser, console.url + "/topics/made-in-browser/messages")
    browser.find_element(By.ID, "produce-partition").send_keys("1")
    browser.find_element(By.ID, "produce-key").send_keys("customer-42")
    browser.find_element(By.ID, "produce-value").send_keys('{"total": 99.5}')
    browser.find_element(By.ID, "produce-submit").click()
    wait_for(browser, lambda d: "customer-42" in text_of(d, "#records"), "the produced record")
    assert "produced to made-in-browser-1 at offset 0" in text_of(browser, "#message")
    assert '{"total": 99.5}' in text_of(browser, "#records")

    # The live tail picks up a record produced outside the browser.
    browser.find_element(By.ID, "tail").click()
    run(_produce_one(console.server.view.bootstrap, "made-in-browser", 1, b"tailed-record"))
    wait_for(browser, lambda d: "tailed-record" in text_of(d, "#records"), "the tailed record")

    # Found again by searching its key, shown as hex.
    open_page(browser, console.url + "/topics/made-in-browser/messages?partition=1&key=customer"
              "&format=hex")
    assert "63 75 73 74" in text_of(browser, "#records")      # "cust"
    # And a bad form value is a message on the page, not a traceback.
    open_page(browser, console.url + "/topics/made-in-browser/messages?partition=1&offset=abc")
    assert "invalid offset 'abc'" in text_of(browser, "#error")
    assert [e.split(" - ", 1)[1] for e in errors(browser)] == [
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"]


def test_the_lag_chart_rises_and_falls(browser, console, cluster):
    cluster.create_topic("clicks", partitions=2, replication_factor=1)
    run(_consume(cluster.bootstrap, "clicks", "dashboard", 0))      # commits offset 0
    open_page(browser, console.url + "/groups/dashboard")

    def chart_total(d):
        data = d.execute_script("return window.lagChart && window.lagChart.data")
        return data["total"] if data and data["total"] else None

    wait_for(browser, lambda d: chart_total(d) and chart_total(d)[-1] == 0, "a first sample")
    run(_produce(cluster.bootstrap, "clicks", 300))
    wait_for(browser, lambda d: chart_total(d)[-1] == 300, "the lag to rise to 300")
    wait_for(browser, lambda d: text_of(d, "#total-lag") == "300", "the table's lag")
    run(_consume(cluster.bootstrap, "clicks", "dashboard", 300))
    wait_for(browser, lambda d: chart_total(d)[-1] == 0, "the lag to fall to 0")
    totals = chart_total(browser)
    rose = totals.index(300)
    assert totals[0] == 0 and 0 in totals[rose:], totals
    browser.save_screenshot(str(SCREENSHOTS / "group-lag-chart.png"))
    assert errors(browser) == []


def test_a_kip253_expansion_from_4_to_8_shows_its_steps(browser, console, cluster):
    from selenium.webdriver.common.by import By
    cluster.create_topic("growing", partitions=4, replication_factor=2)
    run(_produce(cluster.bootstrap, "growing", 40))
    open_page(browser, console.url + "/topics/growing")
    browser.find_element(By.ID, "partition-count").send_keys("8")
    browser.find_element(By.ID, "partitions-submit").click()
    wait_for(browser, lambda d: "/changes/growing" in d.current_url, "the partition changes page")
    assert "partitions 4-7 added" in text_of(browser, "#message")
    steps = wait_for(browser, lambda d: text_of(d, "#steps"), "the steps")
    assert "initial 4, undeleted 8, 8 partitions" in steps
    assert "partitions 4, 5, 6, 7 created with leaderEpochAfterCreation" in steps
    assert "ordering barrier" in steps
    rows = browser.find_elements(By.CSS_SELECTOR, "#change-partitions tr.created-by-expansion")
    assert len(rows) == 4
    open_page(browser, browser.current_url, "changes-expansion")

    # Shrinking without the KIP-253 confirmation is refused on the page.
    open_page(browser, console.url + "/topics/growing")
    browser.find_element(By.ID, "partition-count").send_keys("6")
    browser.find_element(By.ID, "partitions-submit").click()
    assert "marks partitions 6-7 for deletion" in wait_for(
        browser, lambda d: text_of(d, "#error"), "the refusal")
    time.sleep(1.5)                     # the live part refreshes from the topic's page
    assert [e.split(" - ", 1)[1] for e in errors(browser)] == [
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#partitions tr")) == 1 + 8
