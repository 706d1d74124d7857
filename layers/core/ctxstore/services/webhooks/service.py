"""Indexing webhooks: registration per API key, durable signed delivery, delivery records.

* One webhook per API key (record kind `webhook`, org partition, sk = key prefix). It holds the
  URL, the subscribed event types and the signing secret (stored as given: it is needed to sign).
* `emit` (the EventSink ingestion calls) writes nothing to the network: for each subscribed
  webhook of the organisation it enqueues a job on the durable `webhooks` queue carrying the whole
  delivery, and writes a `pending` delivery record. The job re-creates the record if the process
  died between the two writes, so nothing accepted is lost.
* A delivery job POSTs the Standard Webhooks event `{type, timestamp, data}` with the
  `webhook-id` (the delivery id, stable across attempts), `webhook-timestamp` and, when a secret
  is configured, `webhook-signature: v1,<base64>` and the reference's `X-HydraDB-Signature: sha256=<hex>`
  headers. 2xx completes it; a network error, 5xx,
  429 or 408 is retried by the queue runner with exponential backoff and full jitter; anything
  else (other 4xx, a 3xx: redirects are not followed, a refused address) fails it for good.
* Every target is vetted twice, at registration and at each attempt (DNS can change): http or
  https only, and no address that `domain/network_policy.py` refuses (loopback, private, link-local,
  site-local, CGNAT, multicast, unspecified, NAT64 or otherwise non-global, judged with every IPv4
  address an IPv6 form embeds) unless `allow_private_webhooks`; cloud metadata addresses are refused
  in every form even then. The connection goes to the vetted address itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ctxstore import observability as obs
from ctxstore.config import WebhookSettings
from ctxstore.domain.clock_utils import iso
from ctxstore.domain.errors import ApiError, ErrorCode, invalid
from ctxstore.domain.network_policy import address_refusal
from ctxstore.ports.clock import Clock
from ctxstore.ports.http_sender import HttpSender
from ctxstore.ports.records import ConditionFailed, Put, Record, RecordStore
from ctxstore.ports.work_queue import Job, WorkQueue
from ctxstore.services import record_kinds as rk
from ctxstore.services.access.principal import Principal
from ctxstore.services.webhooks import answers as wa
from ctxstore.services.webhooks.rules import (
    COMPLETED,
    DEFAULT_EVENT_TYPES,
    DEFAULT_PAGE,
    DELIVERY_STATUSES,
    FAILED,
    MAX_PAGE,
    PENDING,
    PERMANENTLY_FAILED,
    RETRYABLE_STATUSES,
    SUPPORTED_EVENT_TYPES,
    TEST_EVENT,
    WEBHOOK_QUEUE,
    AttemptResult,
    Target,
    TargetRefused,
    TargetUnresolvable,
    _decode_cursor,
    _encode_cursor,
    check_secret,
    delivery_job_id,
    delivery_put,
    delivery_view,
    generate_secret,
    new_delivery_id,
    parse_url,
    signed_headers,
    webhook_state,
    webhook_view,
)

# ---- the service ---------------------------------------------------------------------------


class WebhookService:
    def __init__(
        self,
        records: RecordStore,
        clock: Clock,
        *,
        queue: Callable[[], WorkQueue],
        sender: Callable[[], HttpSender],
        settings: WebhookSettings | None = None,
    ) -> None:
        """`queue` and `sender`: providers, read when a delivery is queued, vetted or sent (every ingestion emits
        through this service; on AWS a port read builds its client, the sender imports httpx)."""
        self._records = records
        self._clock = clock
        self._queue = queue
        self._sender = sender
        self.settings = settings or WebhookSettings()

    # ---- target vetting ----------------------------------------------------------------------
    def vet(self, url: str) -> Target:
        """Check the URL and every address its host resolves to; raises TargetRefused/TargetUnresolvable."""
        _, host, port = parse_url(url)
        sender = self._sender()
        try:
            addresses = sender.resolve(host, port)
        except OSError as exc:
            raise TargetUnresolvable(f"host '{host}' does not resolve: {exc}") from None
        if not addresses:
            raise TargetUnresolvable(f"host '{host}' does not resolve")
        allow = self.settings.allow_private
        for ip in addresses:
            reason = address_refusal(ip, allow_private=allow)
            if reason is not None:
                raise TargetRefused(f"host '{host}' resolves to {reason}; webhooks may only target public addresses")
        return Target(url=url, host=host, port=port, connect_ip=addresses[0])

    def _vet_for_registration(self, url: str) -> None:
        try:
            self.vet(url)
        except (TargetRefused, TargetUnresolvable) as exc:
            raise invalid(f"url refused: {exc}") from None

    # ---- registration ------------------------------------------------------------------------
    def _webhook(self, p: Principal) -> Record | None:
        return self._records.get(p.org, rk.WEBHOOK, "", p.key_prefix)

    def _require_webhook(self, p: Principal) -> Record:
        rec = self._webhook(p)
        if rec is None:
            raise ApiError(ErrorCode.NOT_FOUND, "no indexing webhook is registered for this API key")
        return rec

    def register(
        self,
        p: Principal,
        url: str,
        event_types: list[str] | None,
        signing_secret: str | None,
        generate_signing_secret: bool,
    ) -> wa.WebhookView:
        if signing_secret is not None and generate_signing_secret:
            raise invalid("signing_secret and generate_signing_secret are mutually exclusive")
        types = DEFAULT_EVENT_TYPES if event_types is None else list(dict.fromkeys(event_types))
        if not types:
            raise invalid("event_types must name at least one event type")
        unknown = [t for t in types if t not in SUPPORTED_EVENT_TYPES]
        if unknown:
            raise invalid(f"unsupported event type '{unknown[0]}'; supported: {', '.join(SUPPORTED_EVENT_TYPES)}")
        if signing_secret is not None:
            check_secret(signing_secret)
        self._vet_for_registration(url)
        returned: str | None = None
        if generate_signing_secret:
            returned = generate_secret()
        elif signing_secret is not None:
            returned = signing_secret
        now = self._clock.now()

        def change(old: dict[str, Any] | None) -> dict[str, Any]:
            data = dict(old or {"created_at": now, "key_prefix": p.key_prefix, "signing_secret": ""})
            data.update(url=url, event_types=types, updated_at=now)
            if returned is not None:
                data["signing_secret"] = returned  # omitted: any existing secret is kept
            return data

        data = self._update_webhook(p, change)
        return webhook_view(data, secret=returned)

    def _update_webhook(
        self, p: Principal, change: Callable[[dict[str, Any] | None], dict[str, Any]]
    ) -> dict[str, Any]:
        for _ in range(20):
            rec = self._webhook(p)
            data = change(dict(rec.data) if rec else None)
            try:
                if rec is None:
                    self._records.put(p.org, Put(rk.WEBHOOK, "", p.key_prefix, data, if_absent=True))
                else:
                    self._records.put(p.org, Put(rk.WEBHOOK, "", p.key_prefix, data, if_version=rec.version))
                return data
            except ConditionFailed:
                continue
        raise ApiError(ErrorCode.CONFLICT, "the webhook is being changed concurrently; retry")

    def get(self, p: Principal) -> wa.WebhookState:
        rec = self._webhook(p)
        if rec is None:
            return {"registered": False, "url": "", "event_types": [], "signing_secret_configured": False}
        return webhook_state(rec.data)

    def delete(self, p: Principal) -> wa.WebhookDeleted:
        self._require_webhook(p)
        deleted = self._records.delete(p.org, rk.WEBHOOK, "", p.key_prefix)
        if not deleted:
            raise ApiError(ErrorCode.NOT_FOUND, "no indexing webhook is registered for this API key")
        return {"deleted": True, "message": "Success"}

    def set_secret(self, p: Principal, signing_secret: str | None) -> wa.SecretSet:
        self._require_webhook(p)
        if signing_secret is not None:
            check_secret(signing_secret)
        secret = signing_secret if signing_secret is not None else generate_secret()

        def change(old: dict[str, Any] | None) -> dict[str, Any]:
            if old is None:
                raise ApiError(ErrorCode.NOT_FOUND, "no indexing webhook is registered for this API key")
            return {**old, "signing_secret": secret, "updated_at": self._clock.now()}

        self._update_webhook(p, change)
        return {"generated": signing_secret is None, "signing_secret": secret, "message": "Success"}

    def clear_secret(self, p: Principal) -> wa.WebhookView:
        self._require_webhook(p)

        def change(old: dict[str, Any] | None) -> dict[str, Any]:
            if old is None:
                raise ApiError(ErrorCode.NOT_FOUND, "no indexing webhook is registered for this API key")
            return {**old, "signing_secret": "", "updated_at": self._clock.now()}

        return webhook_view(self._update_webhook(p, change), message="Signing disabled")

    # ---- events ------------------------------------------------------------------------------
    def emit(self, org: str, event_type: str, payload: dict[str, Any]) -> None:
        """Queue one delivery per subscribed webhook of `org`; never touches the network."""
        hooks: list[Record] = []
        after: str | None = None
        while True:
            page = self._records.query(org, rk.WEBHOOK, "", after=after, limit=1000)
            hooks.extend(r for r in page.records if event_type in r.data.get("event_types", ()))
            if page.next_after is None:
                break
            after = page.next_after
        if not hooks:
            return
        now = self._clock.now()
        data = dict(payload)
        doc_id = str(data.get("doc_id") or data.get("id") or "")
        if doc_id:
            data.setdefault("id", doc_id)
            data.setdefault("doc_id", doc_id)
        data.setdefault("timestamp", iso(now))
        body = json.dumps({"type": event_type, "timestamp": iso(now), "data": data}, separators=(",", ":"))
        for hook in hooks:
            delivery_id = new_delivery_id(now)
            record = {
                "delivery_id": delivery_id,
                "key_prefix": hook.sk,
                "doc_id": doc_id,
                "indexing_status": str(data.get("indexing_status") or ""),
                "event_type": event_type,
                "status": PENDING,
                "attempts": 0,
                "error_code": "",
                "error_message": "",
                "created_at": now,
                "updated_at": now,
                "webhook_url": hook.data["url"],
                "body": body,
                "gen": 0,
            }
            # The job carries the whole delivery, so a crash before the record is written loses nothing.
            self._queue().enqueue(org, WEBHOOK_QUEUE, delivery_job_id(delivery_id, 0), {"delivery": record})
            try:
                self._records.put(org, delivery_put(record, if_absent=True))
            except ConditionFailed:
                pass  # the worker got there first and wrote it from the job

    def _update_delivery(
        self, org: str, key_prefix: str, delivery_id: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any] | None:
        """Read-modify-write with a version check; `change` returns None to leave the record alone."""
        for _ in range(20):
            rec = self._records.get(org, rk.WEBHOOK_DELIVERY, key_prefix, delivery_id)
            if rec is None:
                return None
            new = change(dict(rec.data))
            if new is None:
                return dict(rec.data)
            new["updated_at"] = self._clock.now()
            try:
                self._records.put(org, delivery_put(new, if_version=rec.version))
                return new
            except ConditionFailed:
                continue
        raise ConditionFailed(f"delivery {delivery_id} kept changing under the update")

    # ---- delivery (run by the queue) ---------------------------------------------------------
    def deliver(self, job: Job) -> AttemptResult | None:
        """One attempt of a queued delivery; None when there is nothing (left) to do."""
        org = job.org
        template: dict[str, Any] = job.payload["delivery"]
        gen = int(job.payload.get("gen", template.get("gen", 0)))
        key_prefix, delivery_id = template["key_prefix"], template["delivery_id"]
        rec = self._records.get(org, rk.WEBHOOK_DELIVERY, key_prefix, delivery_id)
        if rec is None:
            try:
                self._records.put(org, delivery_put(template, if_absent=True))
            except ConditionFailed:
                pass
            rec = self._records.get(org, rk.WEBHOOK_DELIVERY, key_prefix, delivery_id)
            if rec is None:
                return None
        if int(rec.data.get("gen", 0)) != gen or rec.data.get("status") in (COMPLETED, PERMANENTLY_FAILED):
            return None  # superseded by a manual retry, or already settled
        hook = self._records.get(org, rk.WEBHOOK, "", key_prefix)
        if hook is None:
            result = AttemptResult(False, error_code="WEBHOOK_UNREGISTERED", error_message="the webhook was deleted")
        elif hook.data.get("url") != rec.data.get("webhook_url"):
            result = AttemptResult(
                False,
                error_code="WEBHOOK_CHANGED",
                error_message="the webhook now points at another URL; retry the delivery to send it there",
            )
        else:
            result = self._attempt(str(hook.data["url"]), str(hook.data.get("signing_secret") or ""), rec.data)
        self._record_attempt(org, key_prefix, delivery_id, gen, result, counted=hook is not None)
        outcome = "delivered" if result.delivered else "retrying" if result.retry else PERMANENTLY_FAILED
        obs.count(obs.WEBHOOK_DELIVERY, outcome=outcome)
        return result

    def _attempt(self, url: str, secret: str, delivery: dict[str, Any]) -> AttemptResult:
        try:
            target = self.vet(url)
        except TargetRefused as exc:
            return AttemptResult(False, error_code="URL_REFUSED", error_message=str(exc))
        except TargetUnresolvable as exc:
            return AttemptResult(False, retry=True, error_code="DNS_ERROR", error_message=str(exc))
        body = str(delivery["body"])
        return self._post(target, body, signed_headers(secret, str(delivery["delivery_id"]), body, self._clock.now()))

    def _post(self, target: Target, body: str, headers: dict[str, str]) -> AttemptResult:
        sender = self._sender()
        status, error = sender.post(
            target.url,
            body.encode(),
            headers,
            self.settings.timeout_s,
            connect_ip=target.connect_ip,
        )
        if status is None:
            return AttemptResult(False, retry=True, error_code="NETWORK_ERROR", error_message=error or "no response")
        if 200 <= status < 300:
            return AttemptResult(True, status_code=status)
        retry = status >= 500 or status in RETRYABLE_STATUSES
        note = " (redirects are not followed)" if 300 <= status < 400 else ""
        return AttemptResult(
            False,
            retry=retry,
            status_code=status,
            error_code=f"HTTP_{status}",
            error_message=f"the endpoint answered HTTP {status}{note}",
        )

    def _record_attempt(
        self, org: str, key_prefix: str, delivery_id: str, gen: int, result: AttemptResult, *, counted: bool
    ) -> None:
        def change(d: dict[str, Any]) -> dict[str, Any] | None:
            if int(d.get("gen", 0)) != gen:
                return None
            if counted:
                d["attempts"] = int(d.get("attempts", 0)) + 1
            if result.delivered:
                d.update(status=COMPLETED, error_code="", error_message="")
            else:
                d.update(
                    status=FAILED if result.retry else PERMANENTLY_FAILED,
                    error_code=result.error_code,
                    error_message=result.error_message[:1000],
                )
            if result.status_code is not None:
                d["last_status_code"] = result.status_code
            return d

        self._update_delivery(org, key_prefix, delivery_id, change)

    def give_up(self, job: Job, error: str) -> None:
        """The queue stopped retrying this job: its delivery is permanently failed."""
        template: dict[str, Any] = job.payload["delivery"]
        gen = int(job.payload.get("gen", template.get("gen", 0)))

        def change(d: dict[str, Any]) -> dict[str, Any] | None:
            if int(d.get("gen", 0)) != gen or d.get("status") in (COMPLETED, PERMANENTLY_FAILED):
                return None
            d["status"] = PERMANENTLY_FAILED
            if not d.get("error_code"):
                d.update(error_code="DELIVERY_FAILED", error_message=error[:1000])
            return d

        self._update_delivery(job.org, template["key_prefix"], template["delivery_id"], change)

    # ---- delivery records --------------------------------------------------------------------
    def list_deliveries(
        self, p: Principal, limit: int | None, cursor: str | None, status: str | None
    ) -> wa.DeliveryPage:
        n = DEFAULT_PAGE if limit is None else limit
        if not 1 <= n <= MAX_PAGE:
            raise invalid(f"limit must be between 1 and {MAX_PAGE}")
        if status is not None and status not in DELIVERY_STATUSES:
            raise invalid(f"status must be one of {', '.join(DELIVERY_STATUSES)}")
        after = _decode_cursor(cursor) if cursor else None
        out: list[wa.DeliveryView] = []
        next_cursor: str | None = None
        while True:
            page = self._records.query(
                p.org, rk.WEBHOOK_DELIVERY, p.key_prefix, after=after, limit=n + 1, descending=True
            )
            stop = False
            for r in page.records:
                if status is not None and r.data.get("status") != status:
                    after = r.sk
                    continue
                if len(out) == n:
                    next_cursor = _encode_cursor(out[-1]["delivery_id"])
                    stop = True
                    break
                out.append(delivery_view(r.data))
                after = r.sk
            if stop or page.next_after is None:
                break
            after = page.next_after
        return {"deliveries": out, "count": len(out), "next_cursor": next_cursor}

    def _require_delivery(self, p: Principal, delivery_id: str) -> Record:
        rec = self._records.get(p.org, rk.WEBHOOK_DELIVERY, p.key_prefix, delivery_id)
        if rec is None:
            raise ApiError(ErrorCode.NOT_FOUND, f"delivery '{delivery_id}' not found")
        return rec

    def get_delivery(self, p: Principal, delivery_id: str) -> wa.DeliveryView:
        return delivery_view(self._require_delivery(p, delivery_id).data)

    def retry_delivery(self, p: Principal, delivery_id: str) -> wa.RetryQueued:
        """Queue a failed or permanently failed delivery again, with a fresh attempt budget.

        It goes to the URL registered now (the delivery's webhook_url is updated to it).
        """
        rec = self._require_delivery(p, delivery_id)
        if rec.data.get("status") not in (FAILED, PERMANENTLY_FAILED):
            raise ApiError(
                ErrorCode.CONFLICT,
                f"delivery '{delivery_id}' is {rec.data.get('status')}; only failed or permanently_failed "
                "deliveries can be retried",
            )
        hook = self._require_webhook(p)
        holder: dict[str, Any] = {}

        def change(d: dict[str, Any]) -> dict[str, Any] | None:
            if d.get("status") not in (FAILED, PERMANENTLY_FAILED):
                return None
            d.update(gen=int(d.get("gen", 0)) + 1, status=PENDING, webhook_url=hook.data["url"])
            holder["new"] = d
            return d

        self._update_delivery(p.org, p.key_prefix, delivery_id, change)
        new = holder.get("new")
        if new is None:
            raise ApiError(ErrorCode.CONFLICT, f"delivery '{delivery_id}' changed state; it is no longer failed")
        gen = int(new["gen"])
        self._queue().enqueue(p.org, WEBHOOK_QUEUE, delivery_job_id(delivery_id, gen), {"delivery": new, "gen": gen})
        return {"delivery_id": delivery_id, "queued": True, "message": "Success"}

    # ---- test delivery -----------------------------------------------------------------------
    def send_test(self, p: Principal) -> wa.WebhookTestResult:
        """POST a signed `webhook.test` event now and report what the endpoint answered; the attempt is kept
        in the delivery history like any delivery (so it can be inspected, and retried if it failed)."""
        hook = self._require_webhook(p)
        now = self._clock.now()
        msg_id = new_delivery_id(now)
        data = {"message": "ctxstore webhook test", "timestamp": iso(now)}
        body = json.dumps({"type": TEST_EVENT, "timestamp": iso(now), "data": data}, separators=(",", ":"))
        try:
            target = self.vet(str(hook.data["url"]))
        except (TargetRefused, TargetUnresolvable) as exc:
            result = AttemptResult(False, error_code="URL_REFUSED", error_message=f"url refused: {exc}")
        else:
            headers = signed_headers(str(hook.data.get("signing_secret") or ""), msg_id, body, self._clock.now())
            result = self._post(target, body, headers)
        self._keep_test(p.org, hook, msg_id, body, now, result)
        message = "Success" if result.delivered else (result.error_message or "delivery failed")
        return {"delivered": result.delivered, "status_code": result.status_code or 0, "message": message}

    def _keep_test(
        self, org: str, hook: Record, delivery_id: str, body: str, now: float, result: AttemptResult
    ) -> None:
        record: dict[str, Any] = {
            "delivery_id": delivery_id,
            "key_prefix": hook.sk,
            "doc_id": "",
            "indexing_status": "",
            "event_type": TEST_EVENT,
            "status": COMPLETED if result.delivered else PERMANENTLY_FAILED,
            "attempts": 1,
            "error_code": result.error_code,
            "error_message": result.error_message[:1000],
            "created_at": now,
            "updated_at": self._clock.now(),
            "webhook_url": hook.data["url"],
            "body": body,
            "gen": 0,
        }
        if result.status_code is not None:
            record["last_status_code"] = result.status_code
        self._records.put(org, delivery_put(record, if_absent=True))
