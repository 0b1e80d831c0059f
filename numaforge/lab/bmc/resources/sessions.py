"""SessionService, the Sessions collection (POST = log in: X-Auth-Token + Location) and Session (DELETE = log
out)."""

from __future__ import annotations

import secrets

from ..http import SimResponse, collection_ok, error, json_ok, lit, not_found
from ..messages import message

BASE = "/redfish/v1/SessionService"
ACCOUNT_URI = "/redfish/v1/AccountService/Accounts/1"


def register(sim) -> None:
    def service(req):
        return json_ok(
            {
                "@odata.id": sim.link(BASE),
                "@odata.type": "#SessionService.v1_2_0.SessionService",
                "Id": "SessionService",
                "Name": "Session Service",
                "ServiceEnabled": True,
                "SessionTimeout": 1800,
                "Status": {"State": "Enabled", "Health": "OK"},
                "Sessions": {"@odata.id": sim.link(f"{BASE}/Sessions")},
            }
        )

    def session_body(sess):
        return {
            "@odata.id": sim.link(f"{BASE}/Sessions/{sess['Id']}"),
            "@odata.type": "#Session.v1_8_0.Session",
            "Id": sess["Id"],
            "Name": "User Session",
            "UserName": sess["UserName"],
            "SessionType": "Redfish",
        }

    def collection(req):
        with sim._lock:
            members = sorted(sim.sessions.values(), key=lambda s: int(s["Id"]))
        return collection_ok(
            sim.link(f"{BASE}/Sessions"),
            "#SessionCollection.SessionCollection",
            "Session Collection",
            [sim.link(f"{BASE}/Sessions/{s['Id']}") for s in members],
            allow="GET, HEAD, POST",
        )

    def login(req):
        body = req.body if isinstance(req.body, dict) else {}
        for prop in ("UserName", "Password"):
            if not isinstance(body.get(prop), str):
                return error(400, message("CreateFailedMissingReqProperties", prop, related=[f"#/{prop}"]))
        if not (
            secrets.compare_digest(body["UserName"], sim.username)
            and secrets.compare_digest(body["Password"], sim.password)
        ):
            return error(401, message("ResourceAtUriUnauthorized", f"{BASE}/Sessions", "Unauthorized"))
        token, sess = sim.new_session()
        out = session_body(sess)
        if sim.password_change_required:
            # DSP0266: the session is created, and says the password must change before anything else
            out["@Message.ExtendedInfo"] = [message("PasswordChangeRequired", ACCOUNT_URI)]
        return SimResponse(201, out, {"X-Auth-Token": token, "Location": out["@odata.id"]})

    def find(sid):
        with sim._lock:
            for token, sess in sim.sessions.items():
                if sess["Id"] == sid:
                    return token, sess
        return None, None

    def get_session(req, sid):
        _, sess = find(sid)
        if sess is None:
            return not_found(req)
        return json_ok(session_body(sess), allow="GET, HEAD, DELETE")

    def delete_session(req, sid):
        token, sess = find(sid)
        if sess is None:
            return not_found(req)
        with sim._lock:
            sim.sessions.pop(token, None)
        return SimResponse(204)

    sim.router.add(lit(BASE), get=service)
    sim.router.add(lit(f"{BASE}/Sessions"), get=collection, post=login, _login=True)
    sim.router.add(lit(f"{BASE}/Sessions") + "/(?P<sid>[^/]+)", get=get_session, delete=delete_session)
