"""The console's ASGI app (Starlette): server-rendered pages, forms that post and redirect, and
two JSON feeds for the live parts (the lag chart and the message tail).

Every page works without JavaScript. With it, static/console.js re-fetches the page's live part
(the request carries X-Console-Fragment: the same template renders only its `live` block) every
second. Bad input and cluster errors come back as a one-line message on the page.
"""
from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import pathlib
import urllib.parse

import jinja2
import kafka.errors as Errors
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from minibroker.client.records import TopicPartition
from minibroker.console.group_view import GroupView
from minibroker.console.kafka_view import (BROWSE_LIMIT, ConsoleError, KafkaView, decode,
                                           whole_number)

log = logging.getLogger("minibroker.console")
HERE = pathlib.Path(__file__).parent
FORMATS = ("utf8", "json", "hex")
TOPICS_PER_PAGE = 200
FRAGMENT = "x-console-fragment"

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                          autoescape=True, trim_blocks=True, lstrip_blocks=True)


def render(request: Request, template: str, status: int = 200, **ctx) -> HTMLResponse:
    """The page, or only its live block when console.js asks for the fragment."""
    t = _env.get_template(template)
    ctx.setdefault("error", None)
    ctx.setdefault("message", request.query_params.get("msg"))
    path = request.url.path
    if request.method == "POST":        # a form's answer: refresh from the page it was on
        for action in ("/partitions", "/delete", "/reset"):
            path = path.removesuffix(action)
    ctx.setdefault("live_url", path + (f"?{request.url.query}" if request.url.query else ""))
    ctx.setdefault("nav", template.split(".")[0])
    if request.headers.get(FRAGMENT) and "live" in t.blocks:
        return HTMLResponse("".join(t.blocks["live"](t.new_context(ctx))), status)
    return HTMLResponse(t.render(ctx), status)


async def form(request: Request) -> dict[str, str]:
    """An url-encoded form (the only kind our pages post) as {name: last value}."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[-1] for k, v in urllib.parse.parse_qs(body, keep_blank_values=True).items()}


def back(path: str, msg: str) -> RedirectResponse:
    return RedirectResponse(f"{path}?{urllib.parse.urlencode({'msg': msg})}", 303)


def problem(e: BaseException) -> str:
    """A cluster error as one line: the Kafka error's name and what it says."""
    if isinstance(e, ConsoleError):
        return str(e)
    if isinstance(e, (Errors.NodeNotReadyError, Errors.KafkaConnectionError, OSError)):
        text = " ".join(str(e).split()).removeprefix(f"{type(e).__name__}: ")
        return f"cannot reach the cluster: {text or type(e).__name__}"
    if isinstance(e, Errors.KafkaError):
        text = " ".join(str(e).split())
        return f"the cluster answered {type(e).__name__}" + (f": {text}" if text else "")
    if isinstance(e, asyncio.TimeoutError):
        return "the cluster did not answer in time"
    return f"cannot reach the cluster: {type(e).__name__}: {' '.join(str(e).split())}"


class Pages:
    def __init__(self, view: KafkaView, groups: GroupView) -> None:
        self.view = view
        self.groups = groups

    async def _page(self, request: Request, template: str, load, **ctx):
        try:
            data = await load()
        except ConsoleError as e:
            return render(request, template, e.status, data=None, error=str(e), **ctx)
        except (Errors.KafkaError, OSError, asyncio.TimeoutError) as e:
            log.debug("page %s failed", request.url.path, exc_info=True)
            return render(request, template, 502, data=None, error=problem(e), **ctx)
        return render(request, template, data=data, **ctx)

    # ------------------------------------------------------------------ cluster
    async def cluster(self, request: Request):
        return await self._page(request, "cluster.html", self.view.cluster)

    # ------------------------------------------------------------------ topics
    async def topics(self, request: Request, nav: str = "topics"):
        q = request.query_params
        text = q.get("q", "").strip()

        async def load():
            found = [t for t in await self.view.topics() if text in t["name"]]
            page = max(1, whole_number(q.get("page") or "1", "page"))
            rows = found[(page - 1) * TOPICS_PER_PAGE:page * TOPICS_PER_PAGE]
            return dict(rows=rows, total=len(found), page=page, first=(page - 1) * TOPICS_PER_PAGE,
                        pages=max(1, -(-len(found) // TOPICS_PER_PAGE)))
        return await self._page(request, "topics.html", load, nav=nav, q=text)

    async def message_topics(self, request: Request):
        return await self.topics(request, "messages")

    async def create_topic(self, request: Request):
        f = await form(request)
        name = f.get("name", "").strip()
        try:
            if not name:
                raise ConsoleError("a topic needs a name")
            configs = {}
            for line in f.get("configs", "").splitlines():
                if line.strip():
                    k, sep, v = line.partition("=")
                    if not sep or not k.strip():
                        raise ConsoleError(f"invalid config line {line.strip()!r}: "
                                           "expected NAME=VALUE")
                    configs[k.strip()] = v.strip()
            await self.view.create_topic(
                name, whole_number(f.get("partitions") or "-1", "partition count"),
                whole_number(f.get("replication_factor") or "-1", "replication factor"), configs)
        except Exception as e:  # noqa: BLE001 - shown on the page
            return await self._form_error(request, "topics.html", lambda: self._first_topics(), e)
        return back(f"/topics/{urllib.parse.quote(name)}", f"topic {name} created")

    async def _first_topics(self) -> dict:
        found = await self.view.topics()
        return dict(rows=found[:TOPICS_PER_PAGE], total=len(found), page=1, first=0,
                    pages=max(1, -(-len(found) // TOPICS_PER_PAGE)))

    async def _form_error(self, request, template, load, e: BaseException, **ctx):
        if not isinstance(e, (ConsoleError, Errors.KafkaError, OSError, asyncio.TimeoutError)):
            raise e
        try:
            data = await load()
        except Exception:  # noqa: BLE001 - the form's error is the one to show
            data = None
        return render(request, template, 400, data=data, error=problem(e), **ctx)

    async def topic(self, request: Request):
        name = request.path_params["name"]
        return await self._page(request, "topic.html", lambda: self.view.topic(name))

    async def delete_topic(self, request: Request):
        name = request.path_params["name"]
        f = await form(request)
        try:
            if f.get("confirm", "").strip() != name:
                raise ConsoleError(f"type the topic's name ({name}) to confirm its deletion")
            await self.view.delete_topic(name)
        except Exception as e:  # noqa: BLE001
            return await self._form_error(request, "topic.html", lambda: self.view.topic(name), e)
        return back("/topics", f"topic {name} deleted")

    async def partitions(self, request: Request):
        name = request.path_params["name"]
        f = await form(request)
        try:
            msg = await self.view.set_partition_count(
                name, whole_number(f.get("count", ""), "partition count"),
                f.get("confirm_delete") == "on")
        except Exception as e:  # noqa: BLE001
            return await self._form_error(request, "topic.html", lambda: self.view.topic(name), e)
        return back(f"/changes/{urllib.parse.quote(name)}", msg)

    # ------------------------------------------------------------------ messages
    def _browse_args(self, q) -> dict:
        fmt = q.get("format", "utf8")
        return dict(partition=q.get("partition", "0"), offset=q.get("offset", ""),
                    timestamp=q.get("timestamp", ""), key=q.get("key", ""),
                    format=fmt if fmt in FORMATS else "utf8", limit=q.get("limit", "50"))

    async def messages(self, request: Request):
        name = request.path_params["name"]
        args = self._browse_args(request.query_params)

        async def load():
            t = await self.view.topic(name)
            tp = TopicPartition(name, whole_number(args["partition"], "partition"))
            if tp.partition not in {p["partition"] for p in t["partitions"]}:
                raise ConsoleError(f"{name} has no partition {tp.partition}")
            limit = max(1, min(BROWSE_LIMIT, whole_number(args["limit"], "limit")))
            start = await self.view.start_offset(tp, args["offset"], args["timestamp"])
            records = await self.view.read(tp, start, limit, args["key"])
            return dict(topic=t, start=start, records=[_record(r, args["format"]) for r in records])
        return await self._page(request, "messages.html", load, args=args, name=name,
                                formats=FORMATS)

    async def produce(self, request: Request):
        name = request.path_params["name"]
        f = await form(request)
        try:
            headers = []
            for line in f.get("headers", "").splitlines():
                if line.strip():
                    k, sep, v = line.partition("=")
                    if not sep or not k.strip():
                        raise ConsoleError(f"invalid header {line.strip()!r}: expected NAME=VALUE")
                    headers.append((k.strip(), v.strip().encode()))
            part = f.get("partition", "").strip()
            key = f.get("key", "")
            md = await self.view.produce(name, whole_number(part, "partition") if part else None,
                                         key.encode() if key else None,
                                         f.get("value", "").encode(), headers)
        except Exception as e:  # noqa: BLE001
            return await self._form_error(request, "messages.html",
                                          lambda: _no_records(self.view, name), e,
                                          args=self._browse_args({}), name=name, formats=FORMATS)
        done = f"produced to {name}-{md.partition} at offset {md.offset}"
        q = urllib.parse.urlencode({"partition": md.partition, "offset": md.offset, "msg": done})
        return RedirectResponse(f"/topics/{urllib.parse.quote(name)}/messages?{q}", 303)

    async def tail(self, request: Request):
        """Records of one partition after `after` (the live tail), as JSON."""
        name = request.path_params["name"]
        q = request.query_params
        try:
            tp = TopicPartition(name, whole_number(q.get("partition", "0"), "partition"))
            after = whole_number(q.get("after", "-1"), "offset")
            fmt = q.get("format", "utf8")
            end = (await self.view.admin.list_offsets({tp: "latest"}))[tp][0]
            start = max(after + 1, end - BROWSE_LIMIT, 0)
            records = await self.view.read(tp, start, BROWSE_LIMIT, q.get("key", ""), 1.0) \
                if start < end else []
        except Exception as e:  # noqa: BLE001
            if not isinstance(e, (ConsoleError, Errors.KafkaError, OSError, asyncio.TimeoutError)):
                raise
            return JSONResponse({"error": problem(e)}, 400)
        return JSONResponse({"records": [_record(r, fmt if fmt in FORMATS else "utf8")
                                         for r in records], "end": end})

    # ------------------------------------------------------------------ groups
    async def group_list(self, request: Request):
        return await self._page(request, "groups.html", self.groups.groups)

    async def group(self, request: Request):
        g = request.path_params["group"]
        return await self._page(request, "group.html", lambda: self.groups.group(g), reset=None)

    async def lag_json(self, request: Request):
        return JSONResponse(self.groups.chart(request.path_params["group"]))

    async def reset(self, request: Request):
        g = request.path_params["group"]
        f = await form(request)
        apply = f.get("apply") == "1"
        try:
            rows = await self.groups.reset_offsets(g, f.get("topic", ""), f.get("strategy", ""),
                                                   f.get("value", ""), apply)
            data = await self.groups.group(g)
        except Exception as e:  # noqa: BLE001
            return await self._form_error(request, "group.html", lambda: self.groups.group(g), e,
                                          reset=None)
        return render(request, "group.html", data=data,
                      reset=dict(rows=rows, applied=apply, form=f),
                      message=("offsets reset" if apply else "dry run: nothing committed"))

    # ------------------------------------------------------------------ partition changes
    async def changes(self, request: Request):
        name = request.query_params.get("topic") or request.path_params.get("name", "")

        async def load():
            topics = await self.view.topics()
            moving = [t for t in topics if t["undeleted"] >= 0 and
                      (t["partitions"] != t["initial"] or t["undeleted"] != t["partitions"])]
            return dict(topics=topics, changing=moving, reassign=await self.view.reassignments(),
                        topic=await self.view.changes(name) if name else None)
        return await self._page(request, "changes.html", load, name=name)

    # ------------------------------------------------------------------ transactions
    async def transactions(self, request: Request):
        topic = request.query_params.get("topic", "")
        return await self._page(request, "transactions.html",
                                lambda: self.groups.transactions(topic), topic=topic)


async def _no_records(view: KafkaView, name: str) -> dict:
    return dict(topic=await view.topic(name), start=None, records=[])


def _record(r, fmt: str) -> dict:
    when = datetime.datetime.fromtimestamp(r.timestamp / 1000, datetime.timezone.utc) \
        if r.timestamp >= 0 else None
    return dict(partition=r.partition, offset=r.offset, timestamp=r.timestamp,
                time=when.isoformat(timespec="milliseconds").replace("+00:00", "Z") if when else "",
                key=decode(r.key, fmt), value=decode(r.value, fmt),
                headers=[(k, decode(v, fmt)) for k, v in r.headers])


async def not_found(request: Request, exc) -> Response:
    return render(request, "error.html", 404, error=f"no page at {request.url.path}")


async def server_error(request: Request, exc) -> Response:
    log.warning("console page %s failed", request.url.path, exc_info=exc)
    return HTMLResponse(_env.get_template("error.html").render(
        error=f"the console failed: {type(exc).__name__}: {' '.join(str(exc).split())}",
        nav="", live_url="", message=None), 500)


class SameOriginPosts:
    """Refuses a form posted from another site (a page elsewhere could otherwise make the
    visitor's browser delete topics here): browsers send Origin with every POST, and it must
    name this console's own host and port. Clients without a browser send none and pass."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = dict(scope["headers"])
            origin = headers.get(b"origin", b"").decode("latin-1")
            host = headers.get(b"host", b"").decode("latin-1")
            if origin and urllib.parse.urlsplit(origin).netloc != host:
                response = HTMLResponse(f"refused: a form posted from {origin} "
                                        "(the console takes forms from its own pages only)", 403)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(view: KafkaView) -> Starlette:
    groups = GroupView(view.admin)
    p = Pages(view, groups)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        await groups.close()
        await view.close()

    async def home(request: Request):
        return await p.cluster(request)
    routes = [
        Route("/", home), Route("/cluster", p.cluster),
        Route("/topics", p.topics), Route("/topics", p.create_topic, methods=["POST"]),
        Route("/topics/{name}", p.topic),
        Route("/topics/{name}/delete", p.delete_topic, methods=["POST"]),
        Route("/topics/{name}/partitions", p.partitions, methods=["POST"]),
        Route("/topics/{name}/messages", p.messages),
        Route("/topics/{name}/messages", p.produce, methods=["POST"]),
        Route("/topics/{name}/tail.json", p.tail), Route("/messages", p.message_topics),
        Route("/groups", p.group_list), Route("/groups/{group}", p.group),
        Route("/groups/{group}/lag.json", p.lag_json),
        Route("/groups/{group}/reset", p.reset, methods=["POST"]),
        Route("/changes", p.changes), Route("/changes/{name}", p.changes),
        Route("/transactions", p.transactions),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(SameOriginPosts)],
                    exception_handlers={404: not_found, 500: server_error})
    app.state.view, app.state.groups = view, groups
    return app

