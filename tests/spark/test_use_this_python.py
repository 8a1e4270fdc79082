"""``register(spark)`` points a local master's Python workers at the running interpreter, and only then.

A stand-in session (no JVM): what the rule reads is the master, ``PYSPARK_PYTHON``, ``spark.pyspark.python``
and the SparkContext's ``pythonExec`` (the name pyspark pickles with a registered data source). The real
thing runs in test_readme_snippet.py.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from seglog.tools.spark import use_this_python


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _Context:
    def __init__(self, master: str, conf: dict[str, str]) -> None:
        self.master = master
        self.conf = _Conf(conf)
        self.pythonExec = "python3"  # pyspark's default when PYSPARK_PYTHON was unset at start

    def getConf(self) -> _Conf:
        return self.conf


class _Session:
    def __init__(self, master: str, conf: dict[str, str] | None = None) -> None:
        self.sparkContext = _Context(master, conf or {})


class _ConnectSession:
    @property
    def sparkContext(self) -> Any:
        raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported in Spark Connect")


@pytest.fixture(autouse=True)
def _no_python_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP"):
        monkeypatch.setenv(name, "")  # recorded, so that whatever the code under test sets is undone
        monkeypatch.delenv(name)


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,2]", "local-cluster[2,1,1024]"])
def test_a_local_master_gets_this_interpreter(master: str) -> None:
    session = _Session(master)
    assert use_this_python(session) is True
    assert session.sparkContext.pythonExec == sys.executable
    assert os.environ["PYSPARK_PYTHON"] == os.environ["PYSPARK_DRIVER_PYTHON"] == sys.executable


@pytest.mark.parametrize("master", ["spark://host:7077", "yarn", "k8s://https://host:6443"])
def test_a_cluster_keeps_its_own_python(master: str) -> None:
    session = _Session(master)
    assert use_this_python(session) is False
    assert session.sparkContext.pythonExec == "python3" and "PYSPARK_PYTHON" not in os.environ


def test_a_python_the_caller_chose_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/python/bin/python3")
    session = _Session("local[2]")
    assert use_this_python(session) is False
    assert os.environ["PYSPARK_PYTHON"] == "/opt/python/bin/python3" and session.sparkContext.pythonExec == "python3"
    monkeypatch.delenv("PYSPARK_PYTHON")
    session = _Session("local[2]", {"spark.pyspark.python": "/opt/python/bin/python3"})
    assert use_this_python(session) is False and "PYSPARK_PYTHON" not in os.environ


def test_a_driver_python_the_caller_chose_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", "ipython")
    assert use_this_python(_Session("local[2]")) is True
    assert os.environ["PYSPARK_DRIVER_PYTHON"] == "ipython"


def test_spark_connect_is_left_alone() -> None:
    assert use_this_python(_ConnectSession()) is False


class _Builder:
    """Stands in for ``SparkSession.builder``: records the environment the session would start with."""

    started_with: dict[str, str | None]

    def master(self, master: str) -> _Builder:
        self._master = master
        return self

    def appName(self, name: str) -> _Builder:
        return self

    def config(self, key: str, value: str) -> _Builder:
        return self

    def getOrCreate(self) -> Any:
        _Builder.started_with = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
        session = _Session(self._master)
        session.sparkContext.setLogLevel = lambda level: None  # type: ignore[attr-defined]
        session.conf = _Conf({})  # type: ignore[attr-defined]
        session.conf.set = lambda key, value: None  # type: ignore[attr-defined]
        session.dataSource = type("Registry", (), {"register": staticmethod(lambda source: None)})()  # type: ignore[attr-defined]
        return session


@pytest.mark.parametrize(("master", "expected"), [("local[2]", sys.executable), ("spark://host:7077", None)])
def test_the_session_helper_sets_both_before_a_local_session_starts(
    monkeypatch: pytest.MonkeyPatch, master: str, expected: str | None
) -> None:
    import pyspark.sql

    from seglog.tools.spark.session import spark_session

    monkeypatch.setattr(pyspark.sql.SparkSession, "builder", _Builder())
    spark_session(master)
    assert _Builder.started_with == {"PYSPARK_PYTHON": expected, "PYSPARK_DRIVER_PYTHON": expected}
