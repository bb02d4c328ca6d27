"""API-Bank hospital and health tools (official `apis/`): appointments, health records, symptom look-ups."""

from __future__ import annotations

from typing import Any

from tooltune.evaluation.apibank.tool import Tool, normal_time, pad_year, same_outcome, strptime

DATE = "%Y-%m-%d"
TIME = "%Y-%m-%d %H:%M:%S"


class _Appointments(Tool):
    database_name = "Appointments"

    @staticmethod
    def format_check(date: Any) -> Any:
        return normal_time(date, DATE)


class AppointmentRegistration(_Appointments):
    name = "AppointmentRegistration"

    def call(self, patient_name: Any, date: Any, doctor_name: Any) -> dict[str, Any]:
        def run() -> str:
            patient, doctor = patient_name.strip(), doctor_name.strip()
            if patient == "" or doctor == "":
                raise Exception("Patient name or doctor name cannot be empty.")
            day = self.format_check(date)
            if isinstance(day, Exception):
                raise day
            for row in self.database.values():
                if row["patient_name"] == patient and self.format_check(row["date"]) == day:
                    if row["doctor_name"] == doctor:
                        raise Exception("This appointment has already been registered.")
                    raise Exception("This patient has already been registered in this day.")
            appointment_id = str(self.rng.randint(10000000, 99999999))
            while appointment_id in self.database:
                appointment_id = str(self.rng.randint(10000000, 99999999))
            self.database[appointment_id] = {"patient_name": patient, "date": day, "doctor_name": doctor}
            return appointment_id

        return self.respond({"patient_name": patient_name, "date": date, "doctor_name": doctor_name}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        r, t = response["input"], truth["input"]
        if r["patient_name"].strip() != t["patient_name"].strip():
            return False
        if self.format_check(r["date"]) != self.format_check(t["date"]):
            return False
        if r["doctor_name"].strip() != t["doctor_name"].strip():
            return False
        if truth["output"] is None and response["output"] is not None:
            return False
        return response["exception"] == truth["exception"]


class CancelRegistration(_Appointments):
    name = "CancelRegistration"

    def call(self, appointment_id: Any) -> dict[str, Any]:
        def run() -> str:
            key = appointment_id.strip()
            if key in self.database:
                del self.database[key]
                return "success"
            raise Exception("The appointment ID is incorrect.")

        return self.respond({"appointment_id": appointment_id}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return (response["input"]["appointment_id"].strip() == truth["input"]["appointment_id"].strip()
                and same_outcome(response, truth))


class ModifyRegistration(_Appointments):
    name = "ModifyRegistration"

    def call(self, appointment_id: Any, new_appointment_date: Any = None,
             new_appointment_doctor: Any = None) -> dict[str, Any]:
        inputs = {"appointment_id": appointment_id, "new_appointment_date": new_appointment_date,
                  "new_appointment_doctor": new_appointment_doctor}
        return self.respond(inputs, lambda: self._modify(appointment_id, new_appointment_date,
                                                         new_appointment_doctor))

    def _modify(self, appointment_id: Any, date: Any, doctor: Any) -> str:
        key = appointment_id.strip()
        if key not in self.database:
            raise Exception("The appointment ID does not exist.")
        if date is not None:
            date = self.format_check(date)
        if doctor is not None:
            doctor = doctor.strip()
            if doctor == "":
                raise Exception("Fail because the doctor name is empty.")
        if isinstance(date, Exception):
            raise date
        row = self.database[key]
        if date is None and doctor is None:
            raise Exception("Fail because no modification is made.")
        if date is None:
            if doctor == row["doctor_name"]:
                raise Exception("Fail because doctor is not changed.")
            row["doctor_name"] = doctor
        elif doctor is None:
            if date == row["date"]:
                raise Exception("Fail because date is not changed.")
            row["date"] = date
        else:
            if date == row["date"] and doctor == row["doctor_name"]:
                raise Exception("Fail because no modification is made.")
            if date == row["date"]:
                raise Exception("Fail because date is not changed.")
            if doctor == row["doctor_name"]:
                raise Exception("Fail because doctor is not changed.")
            row["date"], row["doctor_name"] = date, doctor
        return "success"

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        r, t = response["input"], truth["input"]
        r_id, t_id = str(r["appointment_id"]).strip(), t["appointment_id"].strip()
        r_date, t_date = r["new_appointment_date"], t["new_appointment_date"]
        r_doc, t_doc = r["new_appointment_doctor"], t["new_appointment_doctor"]
        r_date = self.format_check(r_date) if r_date is not None else None
        t_date = self.format_check(t_date) if t_date is not None else None
        r_doc = r_doc.strip() if r_doc is not None else None
        t_doc = t_doc.strip() if t_doc is not None else None
        return r_id == t_id and r_date == t_date and r_doc == t_doc and same_outcome(response, truth)


class QueryRegistration(_Appointments):
    name = "QueryRegistration"

    def call(self, patient_name: Any, date: Any) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            patient, day = patient_name.strip(), self.format_check(date)
            if isinstance(day, Exception):
                raise day
            found = {key: row for key, row in self.database.items()
                     if row["patient_name"] == patient and self.format_check(row["date"]) == day}
            if not found:
                raise Exception("No appointments found.")
            return found

        return self.respond({"patient_name": patient_name, "date": date}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        r, t = response["input"], truth["input"]
        return (r["patient_name"].strip() == t["patient_name"].strip()
                and self.format_check(r["date"]) == self.format_check(t["date"])
                and same_outcome(response, truth))


class RecordHealthData(Tool):
    name = "RecordHealthData"
    database_name = "HealthData"

    def call(self, user_id: Any, time: Any, health_data: Any = None) -> dict[str, Any]:
        inputs = {"user_id": user_id, "time": time, "health_data": health_data}
        return self.respond(inputs, lambda: self._record(user_id, time, health_data))

    def _record(self, user_id: Any, time: Any, health_data: Any) -> str:
        user = user_id.upper().strip()
        if user == "":
            raise Exception("The user id cannot be empty.")
        when = normal_time(time, TIME)
        if isinstance(when, Exception):
            raise when
        if health_data is None or len(health_data) == 0:
            raise Exception("The health data cannot be empty.")
        names = set()
        for item in health_data:
            if "name" not in item:
                raise Exception("The health data has invalid format.")
            if item["name"] in names:
                raise Exception("The health data cannot contain duplicate items.")
            names.add(item["name"])
        records = self.database.setdefault(user, [])
        existing = None
        for record in records:
            if record["time"] == when:
                existing = record
        if existing is not None:
            for item in health_data:
                existing[item["name"]] = item["value"]
        else:
            new = {"time": when}
            for item in health_data:
                new[item["name"]] = item["value"]
            records.append(new)
        return "success"

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        """User and time compared after normalising; the health data itself is not compared."""
        r, t = response["input"], truth["input"]
        return (str(r["user_id"]).upper().strip() == t["user_id"].upper().strip()
                and normal_time(r["time"], TIME) == normal_time(t["time"], TIME)
                and same_outcome(response, truth))


class QueryHealthData(Tool):
    name = "QueryHealthData"
    database_name = "HealthData"

    @staticmethod
    def format_check(user_id: Any, start_time: Any, end_time: Any) -> tuple[Any, Any, Any]:
        user = user_id.upper().strip() or None
        times = []
        for text in (start_time, end_time):
            text = pad_year(text)
            try:
                times.append(strptime(text, TIME))
            except Exception as e:
                times.append(e)
        return user, times[0], times[1]

    def call(self, user_id: Any, start_time: Any, end_time: Any) -> dict[str, Any]:
        def run() -> list[Any]:
            user, start, end = self.format_check(user_id, start_time, end_time)
            if user is None:
                raise Exception("The user id cannot be empty.")
            if isinstance(start, Exception) and isinstance(end, Exception):
                raise Exception(str(start) + "; " + str(end))
            if isinstance(start, Exception):
                raise start
            if isinstance(end, Exception):
                raise end
            if start > end:
                raise Exception("The start time cannot be later than the end time.")
            if user not in self.database:
                raise Exception("The user id does not exist.")
            found = [item for item in self.database[user] if start <= strptime(item["time"], TIME) <= end]
            if not found:
                raise Exception("There is no health data in the given time span.")
            return found

        return self.respond({"user_id": user_id, "start_time": start_time, "end_time": end_time}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        r, t = response["input"], truth["input"]
        mine = self.format_check(r["user_id"], r["start_time"], r["end_time"])
        theirs = self.format_check(t["user_id"], t["start_time"], t["end_time"])
        return all(a == b for a, b in zip(mine, theirs)) and same_outcome(response, truth)


class SymptomSearch(Tool):
    name = "SymptomSearch"
    database_name = "Symptom"
    fields = ("name", "description")

    @staticmethod
    def format_check(symptom: Any) -> Any:
        symptom = symptom.strip().lower()
        if symptom == "":
            raise Exception("The symptom cannot be empty.")
        return symptom

    def call(self, symptom: Any) -> dict[str, Any]:
        def run() -> list[dict[str, Any]]:
            key = self.format_check(symptom)
            if isinstance(key, Exception):
                raise key
            if key not in self.database:
                raise Exception("The symptom does not exist.")
            return [{f: item[f] for f in self.fields} for item in self.database[key]]

        return self.respond({"symptom": symptom}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        mine, theirs = response["input"]["symptom"], truth["input"]["symptom"]
        return self.format_check(mine) == self.format_check(theirs) and same_outcome(response, truth)


class EmergencyKnowledge(SymptomSearch):
    name = "EmergencyKnowledge"
    fields = ("name", "aid")

    @staticmethod
    def format_check(symptom: Any) -> Any:
        """Officially an empty symptom becomes an Exception object whose `.lower()` then fails."""
        symptom = symptom.strip()
        if symptom == "":
            symptom = Exception("The symptom cannot be empty.")
        return symptom.lower()


TOOLS: tuple[type[Tool], ...] = (AppointmentRegistration, CancelRegistration, ModifyRegistration,
                                 QueryRegistration, RecordHealthData, QueryHealthData, SymptomSearch,
                                 EmergencyKnowledge)
