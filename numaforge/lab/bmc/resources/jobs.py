"""Dell-like BIOS config jobs under /redfish/v1/Managers/iDRAC.Embedded.1/Jobs (only for the dell flavour).

POST {"TargetSettingsURI": ".../Bios/Settings"} creates a config job (Location header); the job goes
Scheduled -> Running (host reset starts) -> Completed (host booted, pending values applied). A second job or a
PATCH while one is Scheduled/Running is refused with IDRAC SYS011. DELETE removes a job (and, if it had not run,
the pending values); a Running job is not deleted (400 Base.ResourceInUse)."""

from __future__ import annotations

from ..http import SimResponse, collection_ok, error, json_ok, lit, normalise, not_found
from ..messages import message


def register(sim) -> None:
    f = sim.flavour
    if f.jobs != "dell":
        return
    st = sim.state
    base = f.jobs_path

    def job_body(job):
        return {"@odata.id": f"{base}/{job['Id']}", "@odata.type": "#DellJob.v1_5_0.DellJob", **job}

    def collection(req):
        st.advance()
        with st.lock:
            jobs = sorted(st.jobs.values(), key=lambda j: j["CreatedTime"])
        return collection_ok(
            base,
            "#DellJobCollection.DellJobCollection",
            "JobQueue",
            [f"{base}/{j['Id']}" for j in jobs],
            allow="GET, HEAD, POST",
        )

    def create(req):
        body = req.body if isinstance(req.body, dict) else {}
        target = body.get("TargetSettingsURI")
        if target is None:
            return error(
                400, message("CreateFailedMissingReqProperties", "TargetSettingsURI", related=["#/TargetSettingsURI"])
            )
        if not isinstance(target, str) or normalise(target).lower() != normalise(f.settings_path).lower():
            return error(
                400,
                message("PropertyValueNotInList", str(target), "TargetSettingsURI", related=["#/TargetSettingsURI"]),
            )
        st.advance()
        with st.lock:
            if st.active_job() is not None:
                return error(400, message("SYS011"))
            if not st.pending:
                return error(400, message("JCP000"))
            job = st.create_job(f.settings_path)
            if st.apply_time is None:
                st.apply_time = "OnReset"
                st.save()
        return SimResponse(200, {"@Message.ExtendedInfo": [message("SUP0518")]}, {"Location": f"{base}/{job['Id']}"})

    def get_job(req, jid):
        st.advance()
        with st.lock:
            job = st.jobs.get(jid)
            if job is None:
                return not_found(req)
            return json_ok(job_body(dict(job)), allow="GET, HEAD, DELETE")

    def delete_job(req, jid):
        deleted = st.delete_job(jid)
        if deleted is None:  # running: iDRAC refuses to delete a job that is running
            return error(400, message("ResourceInUse"))
        if not deleted:
            return not_found(req)
        return SimResponse(200, {"@Message.ExtendedInfo": [message("Success")]})

    sim.router.add(lit(base), get=collection, post=create)
    sim.router.add(lit(base) + "/(?P<jid>JID_[0-9]+)", get=get_job, delete=delete_job)
