"""ACEBench agent sandbox: our own re-implementation of ACEBench's simulated phone and travel APIs.

Written from the public behaviour of ACEBench's scenario classes (repository ACEBench/ACEBench,
`model_inference/multi_step/scenariosen/phone_platform/{base_api,message,reminder,food_services}.py`,
`model_inference/multi_turn/scenariosen/phone_platform/*.py`, `model_inference/(multi_turn/)scenariosen/
travel.py`) and of its executor (`model_inference/multi_step/multi_step_utils.py:
execute_agent_func_call`): initial data, return values, error messages and the state kept for scoring
(`SAVED_CLASS` in `model_inference/apimodel_inference.py`). Nothing is vendored or executed from
strings: `Sandbox.execute` dispatches a parsed `ToolCall` to a public method by name, with the
literal arguments the parser produced. The phone classes are here; `Travel` is in `travel`;
`end_to_end` is ACEBench's end-state check (evaluation's agent verdict and the `acebench` environment).

Behaviour that matters for the score and that we reproduce:
- every involved class is instantiated at the first executed call, then loads the entry's
  `initial_config[class]` and then `initial_config["BaseApi"]` (wifi, logged_in);
- a method offered by several instances (turn_on_wifi, login_device: every phone class inherits
  BaseApi) runs on each of them, in `involved_classes` order; the last result is returned;
- an exception becomes the result text "Error during execution: <message>";
- dict results are JSON-encoded, other results `str()`-ed;
- the state is the `SAVED` attributes of each instance, through a JSON round trip (int keys become
  strings, as in ACEBench's result files).
`variant` ("multi_step" / "multi_turn") is passed to every class; ACEBench keeps separate copies of
the classes per category, but every ground truth of the current data fits the same initial data.
"""

from __future__ import annotations

import copy
import inspect
import json
from datetime import datetime
from typing import Any

from tooltune.config import Registry
from tooltune.environments.acebench_apis.travel import Travel
from tooltune.schema import ToolCall

SAVED = {
    "BaseApi": ("wifi", "logged_in"),
    "MessageApi": ("inbox",),
    "ReminderApi": ("reminder_list",),
    "FoodPlatform": ("users", "logged_in_users", "orders"),
    "Travel": ("users", "reservations"),
}
"""Attributes compared with the ground truth, per class (ACEBench's SAVED_CLASS)."""


def _fail(message: str) -> dict[str, Any]:
    return {"status": False, "message": message}


class BaseApi:
    def __init__(self, variant: str = "multi_turn") -> None:
        self.wifi, self.logged_in = False, True

    def _load_scenario(self, scenario: dict[str, Any]) -> None:
        self.wifi = scenario.get("wifi", False)
        self.logged_in = scenario.get("logged_in", True)

    def turn_on_wifi(self) -> dict[str, Any]:
        self.wifi = True
        return {"status": True, "message": "Wi-Fi has been turned on"}

    def login_device(self) -> dict[str, Any]:
        self.logged_in = True
        return {"status": True, "message": "Device has been logged in"}


_PEOPLE = ("Eve", "Frank", "Grace", "Helen", "Isaac", "Jack")


class MessageApi(BaseApi):
    def __init__(self, variant: str = "multi_turn") -> None:
        super().__init__(variant)
        self.max_capacity = 6
        self.user_list = {name: {"user_id": f"USR{100 + i}"} for i, name in enumerate(_PEOPLE)}
        texts = [
            ("USR100", "USR101", "Hey Frank, don't forget about our meeting on 2024-06-11 at 4 PM in "
             "Conference Room 1.", "2024-06-09"),
            ("USR101", "USR102", "Can you help me order a \"Margherita Pizza\" delivery? The merchant is "
             "Domino's.", "2024-03-09"),
            ("USR102", "USR103", "Please check the milk tea delivery options available from Heytea and "
             "purchase a cheaper milk tea for me. After making the purchase, remember to reply to me with "
             "\"Already bought.\"", "2023-12-05"),
            ("USR103", "USR102", "No problem Helen, I can assist you.", "2024-09-09"),
            ("USR104", "USR105", "Isaac, are you available for a call?", "2024-06-06"),
            ("USR105", "USR104", "Yes Jack, let's do it in 30 minutes.", "2024-01-15"),
        ]
        self.inbox: dict[int, dict[str, Any]] = {
            i: {"sender_id": s, "receiver_id": r, "message": m, "time": t}
            for i, (s, r, m, t) in enumerate(texts, 1)}
        self.message_id_counter = 6

    def send_message(self, sender_name: str, receiver_name: str, message: str) -> dict[str, Any]:
        if not self.logged_in:
            return _fail("Device not logged in, unable to send message")
        if not self.wifi:
            return _fail("Wi-Fi is turned off, cannot send messages at this time")
        if len(self.inbox) >= self.max_capacity:
            return _fail("Inbox capacity is full. You need to ask the user which message to delete.")
        if sender_name not in self.user_list or receiver_name not in self.user_list:
            return _fail("Sender or receiver does not exist")
        self.message_id_counter += 1
        self.inbox[self.message_id_counter] = {"sender_id": self.user_list[sender_name]["user_id"],
                                               "receiver_id": self.user_list[receiver_name]["user_id"],
                                               "message": message}
        return {"status": True, "message": f"Message successfully sent to {receiver_name}."}

    def delete_message(self, message_id: int) -> dict[str, Any]:
        if not self.logged_in:
            return _fail("Device not logged in, unable to delete message")
        if message_id not in self.inbox:
            return _fail("Message ID does not exist")
        del self.inbox[message_id]
        return {"status": True, "message": f"Message ID {message_id} has been successfully deleted."}

    def view_messages_between_users(self, sender_name: str, receiver_name: str) -> dict[str, Any]:
        if not self.logged_in:
            return _fail("Device not logged in, unable to view message information")
        if sender_name not in self.user_list:
            return _fail("Sender does not exist")
        if receiver_name not in self.user_list:
            return _fail("Receiver does not exist")
        sid, rid = self.user_list[sender_name]["user_id"], self.user_list[receiver_name]["user_id"]
        found = [{"id": i, "sender": sender_name, "receiver": receiver_name, "message": m["message"]}
                 for i, m in self.inbox.items() if m["sender_id"] == sid and m["receiver_id"] == rid]
        return {"status": True, "messages": found} if found else _fail("No related message records found")

    def search_messages(self, user_name: str, keyword: str) -> dict[str, Any]:
        if user_name not in self.user_list:
            return _fail("User does not exist")
        uid = self.user_list[user_name]["user_id"]
        found = [{"id": i, **{k: m[k] for k in ("sender_id", "receiver_id", "message")}}
                 for i, m in self.inbox.items()
                 if uid in (m["sender_id"], m["receiver_id"]) and keyword.lower() in m["message"].lower()]
        if not found:
            return _fail("No messages found containing the keyword")
        return {"status": True, "messages": found}

    def _extreme_id(self, latest: bool) -> dict[str, Any]:
        which = "latest" if latest else "earliest"
        if not self.logged_in:
            return _fail(f"Device not logged in, unable to retrieve the {which} sent message ID.")
        if not self.inbox:
            return _fail("No message records found")
        best_id, best = None, None
        for i, m in self.inbox.items():  # a message without "time" raises, as in ACEBench
            t = datetime.strptime(m["time"], "%Y-%m-%d")
            if best is None or (t > best if latest else t < best):
                best_id, best = i, t
        return {"status": True, "message": f"The {which} message ID is {best_id}", "message_id": best_id}

    def get_latest_message_id(self) -> dict[str, Any]:
        return self._extreme_id(latest=True)

    def get_earliest_message_id(self) -> dict[str, Any]:
        return self._extreme_id(latest=False)


_NOTE_EN = ("First, help Frank place a food delivery order at \"Hema Fresh,\" ordering two \"Fresh Gift "
            "Packs.\" Then, send a message to Frank saying, \"The price of the purchased goods is () yuan.\" "
            "Replace the parentheses with the actual amount, keeping one decimal place.")


class ReminderApi(BaseApi):
    def __init__(self, variant: str = "multi_turn") -> None:
        super().__init__(variant)
        self.max_capacity = 6
        rows = [("Doctor's Appointment", "Visit Dr. Smith for a checkup.", "2024-07-15 09:30"),
                ("Team Meeting", "Monthly project review with the team.", "2024-07-17 11:00"),
                ("To-do list", _NOTE_EN, "2024-07-16 11:00")]
        self.reminder_list: dict[int, dict[str, Any]] = {
            i: {"reminder_id": 1000 + i, "title": t, "description": d, "time": tm, "notified": False}
            for i, (t, d, tm) in enumerate(rows, 1)}
        self.reminder_id_counter = len(rows)

    def view_reminder_by_title(self, title: str) -> dict[str, Any]:
        if not self.logged_in:
            return _fail("The device is not logged in, so you cannot view notifications")
        for r in self.reminder_list.values():
            if r["title"] == title:
                return {"status": True, "reminder": r}
        return _fail(f"No reminder found with the title '{title}'.")

    def add_reminder(self, title: str, description: str, time: str) -> dict[str, Any]:
        if not self.logged_in:
            return _fail("Device not logged in. Unable to add a new reminder.")
        if len(self.reminder_list) >= self.max_capacity:
            return _fail("Reminder capacity is full. Unable to add a new reminder.")
        self.reminder_id_counter += 1
        rid = self.reminder_id_counter
        self.reminder_list[rid] = {"reminder_id": rid, "title": title, "description": description,
                                   "time": time, "notified": False}
        return {"status": True, "message": f"Reminder '{title}' was successfully added."}

    def delete_reminder(self, reminder_id: int) -> dict[str, Any]:
        if not self.logged_in:
            return _fail("Device not logged in. Unable to delete the specified reminder.")
        if reminder_id not in self.reminder_list:
            return _fail("Reminder ID does not exist.")
        del self.reminder_list[reminder_id]
        return {"status": True, "message": f"Reminder ID {reminder_id} was successfully deleted."}

    def view_all_reminders(self) -> dict[str, Any]:
        if not self.reminder_list:
            return _fail("No reminders found.")
        keys = ("title", "description", "time", "notified")
        return {"status": True, "reminders": [{k: r[k] for k in keys} for r in self.reminder_list.values()]}

    def search_reminders(self, keyword: str) -> dict[str, Any]:
        k = keyword.lower()
        found = [{"title": r["title"], "description": r["description"], "time": r["time"]}
                 for r in self.reminder_list.values()
                 if k in r["title"].lower() or k in r["description"].lower()]
        return {"status": True, "reminders": found} if found else _fail("No reminders found with the keyword")


_MENUS = {
    "Domino's": ("M100", "Pizza", [("Margherita Pizza", 68.0), ("Super Supreme Pizza", 88.0)]),
    "Rice Village Bibimbap": ("M101", "Bibimbap", [("Stone Pot Bibimbap", 35.0),
                                                   ("Korean Beef Bibimbap", 45.0)]),
    "Haidilao": ("M102", "Hotpot", [("Beef Rolls", 68.0), ("Seafood Platter", 88.0)]),
    "Heytea": ("M103", "Milk Tea", [("Cheese Milk Tea", 25.0), ("Four Seasons Spring Milk Tea", 22.0)]),
    "Hema Fresh": ("M104", "Fresh Grocery", [("Organic Vegetable Pack", 15.0), ("Fresh Gift Pack", 99.0)]),
    "Jiutian BBQ": ("M105", "BBQ", [("Korean Grilled Beef", 128.0), ("Grilled Pork Belly", 78.0)]),
}
_FOOD_USERS = (("password123", 500.0), ("password456", 300.0), ("password789", 150.0),
               ("password321", 800.0), ("password654", 400.0), ("password654", 120.0))


class FoodPlatform(BaseApi):
    def __init__(self, variant: str = "multi_turn") -> None:
        super().__init__(variant)
        self.users = {name: {"user_id": f"U{100 + i}", "password": pw, "balance": bal}
                      for i, (name, (pw, bal)) in enumerate(zip(_PEOPLE, _FOOD_USERS))}
        self.merchant_list = {m: {"merchant_id": mid, "service_type": kind,
                                  "menu": [{"product": p, "price": pr} for p, pr in menu]}
                              for m, (mid, kind, menu) in _MENUS.items()}
        self.logged_in_users: list[str] = []
        self.orders: list[dict[str, Any]] = []

    def _load_scenario(self, scenario: dict[str, Any]) -> None:
        super()._load_scenario(scenario)
        self.logged_in_users = scenario.get("logged_in_users", [])

    def login_food_platform(self, username: str, password: str) -> dict[str, Any]:
        if not self.wifi:
            return _fail("Wi-Fi is not enabled, unable to login")
        if username not in self.users:
            return _fail("User does not exist")
        if self.users[username]["password"] != password:
            return _fail("Incorrect password")
        if username in self.logged_in_users:
            return _fail(f"{username} is already logged in")
        self.logged_in_users.append(username)
        return {"status": True, "message": f"User {username} has successfully logged in!"}

    def view_logged_in_users(self) -> dict[str, Any]:
        if not self.logged_in_users:
            return _fail("No users are currently logged in to the food platform")
        return {"status": True, "logged_in_users": self.logged_in_users}

    def check_balance(self, user_name: str) -> float:
        return self.users[user_name]["balance"] if user_name in self.users else 0.0

    def add_food_delivery_order(self, username: str, merchant_name: str, items: list) -> dict[str, Any]:
        if username not in self.logged_in_users:
            return _fail(f"User {username} is not logged in to the food platform")
        if merchant_name not in self.merchant_list:
            return _fail("Merchant does not exist")
        total, rows = 0.0, []
        for item in items:
            name, qty = item.get("product"), item.get("quantity", 1)
            if not isinstance(qty, int) or qty <= 0:
                return _fail(f"Invalid quantity {qty} for product {name}")
            hit = next((p for p in self.merchant_list[merchant_name]["menu"] if p["product"] == name), None)
            if hit is None:
                return _fail(f"Product {name} does not exist in {merchant_name}'s menu")
            total += hit["price"] * qty
            rows.append({"product": name, "quantity": qty, "price_per_unit": hit["price"]})
        if total > self.users[username]["balance"]:
            return _fail("Insufficient balance to place the order")
        self.users[username]["balance"] -= total
        self.orders.append({"user_name": username, "merchant_name": merchant_name, "items": rows,
                            "total_price": total})
        return {"status": True, "message": f"Food delivery order successfully placed with {merchant_name}. "
                f"Total amount: {total} yuan"}

    def get_products(self, merchant_name: str) -> Any:
        merchant = self.merchant_list.get(merchant_name)
        return merchant["menu"] if merchant else _fail(f"Merchant '{merchant_name}' does not exist")

    def view_orders(self, user_name: str) -> dict[str, Any]:
        mine = [o for o in self.orders if o["user_name"] == user_name]
        return {"status": True, "orders": mine} if mine else _fail("User has no order records")

    def search_orders(self, keyword: str) -> dict[str, Any]:
        k = keyword.lower()
        hits = [o for o in self.orders if k in o["merchant_name"].lower()
                or any(k in i["product"].lower() for i in o.get("items", []))]
        return {"status": True, "orders": hits} if hits else _fail("No matching orders found")


CLASSES: Registry[type] = Registry("ACEBench class", key="involved_classes")
"""The ACEBench API classes a conversation may involve, by name."""
for _api in (BaseApi, MessageApi, ReminderApi, FoodPlatform, Travel):
    CLASSES.add(_api.__name__, _api)


def result_text(value: Any) -> str:
    """What the agent sees: JSON for dicts (str() if not serializable), str() otherwise."""
    if isinstance(value, dict):
        try:
            return json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            return str(value)
    return value if isinstance(value, str) else str(value)


class Sandbox:
    """The API instances of one conversation; created at the first executed call."""

    def __init__(self, initial_config: dict[str, Any], involved: list[str], variant: str) -> None:
        for name in involved:
            CLASSES.get(name)  # an unknown class is refused now, not at the first executed call
        self.initial_config, self.involved, self.variant = initial_config, list(involved), variant
        self.instances: dict[str, Any] = {}

    def _ensure(self) -> None:
        if self.instances:
            return
        for name in self.involved:
            inst = CLASSES[name](self.variant)
            inst._load_scenario(copy.deepcopy(self.initial_config.get(name, {})))
            inst._load_scenario(copy.deepcopy(self.initial_config.get("BaseApi", {})))
            self.instances[name] = inst

    def methods(self, name: str) -> list[Any]:
        """Bound public methods called `name`, one per instance offering it."""
        if not name.isidentifier() or name.startswith("_"):
            return []
        out = []
        for inst in self.instances.values():
            m = getattr(inst, name, None)
            if inspect.ismethod(m):
                out.append(m)
        return out

    def execute(self, call: ToolCall) -> str:
        self._ensure()
        found = self.methods(call.name)
        if not found:
            return f"Error during execution: function {call.name!r} does not exist"
        result: Any = None
        try:
            for m in found:
                result = m(**copy.deepcopy(dict(call.arguments)))
        except Exception as e:  # the simulated API's own failure, reported to the agent as ACEBench does
            return f"Error during execution: {e}"
        return result_text(result)

    @property
    def started(self) -> bool:
        return bool(self.instances)

    def state(self) -> list[dict[str, Any]]:
        """[{class: {saved attribute: value}}] per instance (empty if nothing was ever executed)."""
        out = []
        for name, inst in self.instances.items():
            saved = {k: getattr(inst, k) for k in SAVED[name] if hasattr(inst, k)}
            out.append({name: json.loads(json.dumps(saved, ensure_ascii=False, default=str))})
        return out


def end_to_end(state: list[dict[str, Any]], ground_truth: list[dict[str, Any]]) -> str | None:
    """None when the final state matches (ACEBench's agent_eval + agent_checker), else why not."""
    if len(state) != len(ground_truth):
        return f"wrong number of classes: {len(state)} in the state, {len(ground_truth)} expected"
    errors = []
    for gt in ground_truth:
        got = next((s for s in state if set(s) == set(gt)), None)
        if got is None:
            continue
        (cls, want), = gt.items()
        for attr, value in got[cls].items():
            if attr not in want:
                errors.append(f"{cls}.{attr} is not in the ground truth")
            elif isinstance(want[attr], dict):
                errors += [f"{cls}.{attr}.{k}: expected {v!r:.120}, got {value.get(k, '<missing>')!r:.120}"
                           for k, v in want[attr].items() if not isinstance(value, dict) or value.get(k) != v]
            elif want[attr] != value:
                errors.append(f"{cls}.{attr}: expected {want[attr]!r:.120}, got {value!r:.120}")
    return "; ".join(errors)[:1000] or None
