"""ACEBench agent sandbox, travel scenario: our re-implementation of ACEBench's flight booking API.

Written from the public behaviour of ACEBench's `model_inference/(multi_turn/)scenariosen/travel.py`
(initial data, return values, error texts); the sandbox itself and the phone classes are in
`sandbox`, which registers `Travel` in its `CLASSES`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

_FLIGHTS = [  # flight_no, origin, destination, depart, arrive, seats, economy, business
    ("CA1234", "Beijing", "Shanghai", "2024-07-15 08:00:00", "2024-07-15 10:30:00", 5, 1200, 3000),
    ("MU5678", "Shanghai", "Beijing", "2024-07-16 09:00:00", "2024-07-16 11:30:00", 3, 1900, 3000),
    ("CZ4321", "Shanghai", "Beijing", "2024-07-16 20:00:00", "2024-07-16 22:00:00", 8, 2500, 4000),
    ("CZ4352", "Shanghai", "Beijing", "2024-07-17 20:00:00", "2024-07-17 22:00:00", 8, 1600, 2500),
    ("MU3561", "Beijing", "Nanjing", "2024-07-18 08:00:00", "2024-07-18 10:00:00", 8, 1500, 4000),
    ("MU1566", "Beijing", "Nanjing", "2024-07-18 20:00:00", "2024-07-18 22:00:00", 8, 1500, 4000),
    ("CZ1765", "Nanjing", "Shenzhen", "2024-07-17 20:30:00", "2024-07-17 22:00:00", 8, 1500, 2500),
    ("CZ1765", "Nanjing", "Shenzhen", "2024-07-18 12:30:00", "2024-07-18 15:00:00", 8, 1500, 2500),
    ("MH1765", "Xiamen", "Chengdu", "2024-07-17 12:30:00", "2024-07-17 15:00:00", 8, 1500, 2500),
    ("MH2616", "Chengdu", "Xiamen", "2024-07-18 18:30:00", "2024-07-18 21:00:00", 8, 1500, 2500),
    ("MH2616", "Chengdu", "Fuzhou", "2024-07-16 18:30:00", "2024-07-16 21:00:00", 8, 1500, 2500),
]
_FLIGHT_KEYS = ("flight_no", "origin", "destination", "depart_time", "arrival_time", "seats_available",
                "economy_price", "business_price")
_RESERVATIONS = [("res_1", "user1", "CA1234", "Economy Class", "Beijing", "Shanghai"),
                 ("res_2", "user1", "MU5678", "Business Class", "Shanghai", "Beijing"),
                 ("res_3", "user2", "MH1765", "Business Class", "Xiamen", "Chengdu"),
                 ("res_4", "user2", "MU2616", "Business Class", "Chengdu", "Xiamen")]
_FREE_BAGS = {"regular": {"Economy Class": 1, "Business Class": 2},
              "silver": {"Economy Class": 2, "Business Class": 3},
              "gold": {"Economy Class": 3, "Business Class": 3}}
_TIME = "%Y-%m-%d %H:%M:%S"


class Travel:
    """Flight booking (ACEBench `scenariosen/travel.py`); it ignores `initial_config`."""

    def __init__(self, variant: str = "multi_turn") -> None:
        people = (("Eve", "password123", 2000.0, 50000.0, "regular"),
                  ("Frank", "password456", 8000.0, 8000.0, "silver"),
                  ("Grace", "password789", 1000.0, 5000.0, "gold"))
        self.users = {f"user{i}": {"user_name": n, "password": pw, "cash_balance": c, "bank_balance": b,
                                   "membership_level": lv} for i, (n, pw, c, b, lv) in enumerate(people, 1)}
        self.flights = [{**dict(zip(_FLIGHT_KEYS[:5], f[:5])), "status": "available",
                         **dict(zip(_FLIGHT_KEYS[5:], f[5:]))} for f in _FLIGHTS]
        self.reservations = [{"reservation_id": r, "user_id": u, "flight_no": f, "payment_method": "bank",
                              "cabin": c, "baggage": 1, "origin": o, "destination": d}
                             for r, u, f, c, o, d in _RESERVATIONS]

    def _load_scenario(self, scenario: dict[str, Any]) -> None:
        pass

    def _flight(self, flight_no: str, available: bool = False) -> dict[str, Any] | None:
        return next((f for f in self.flights if f["flight_no"] == flight_no
                     and (not available or f["status"] == "available")), None)

    def get_flight_details(self, origin: str | None = None, destination: str | None = None) -> Any:
        found = [f for f in self.flights if (not origin or f["origin"] == origin)
                 and (not destination or f["destination"] == destination)]
        if not found:
            return "There are no direct flights that meet the criteria."
        return [dict(f) for f in found]

    def get_user_details(self, user_id: str, password: str) -> dict[str, Any]:
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return {k: v for k, v in user.items() if k != "password"}
        return {"status": "error", "message": "Incorrect username or password."}

    def get_reservation_details(self, reservation_id: str | None = None, user_id: str | None = None) -> Any:
        if reservation_id:
            rows = [r for r in self.reservations if r["reservation_id"] == reservation_id]
        elif user_id:
            rows = [r for r in self.reservations if r["user_id"] == user_id]
        else:
            return {"status": "error", "message": "Please provide a valid reservation ID or user ID"}
        return [{**r, "flight_info": self._flight(r["flight_no"])} for r in rows]

    def authenticate_user(self, user_id: str, password: str) -> dict[str, Any]:
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return user
        return {"status": "error", "message": "Incorrect username or password."}

    def get_baggage_allowance(self, membership_level: str, cabin_class: str) -> int:
        return _FREE_BAGS.get(membership_level, {}).get(cabin_class, 0)

    def find_transfer_flights(self, origin_city: str, transfer_city: str, destination_city: str) -> Any:
        first = [f for f in self.flights if f["origin"] == origin_city and f["destination"] == transfer_city
                 and f["status"] == "available"]
        second = [f for f in self.flights if f["origin"] == transfer_city
                  and f["destination"] == destination_city and f["status"] == "available"]
        pairs = [{"first_leg": a, "second_leg": b} for a in first for b in second
                 if datetime.strptime(a["arrival_time"], _TIME) < datetime.strptime(b["depart_time"], _TIME)]
        return pairs or "No connecting flights that meet the criteria were found."

    def calculate_baggage_fee(self, membership_level: str, cabin_class: str, baggage_count: int) -> int:
        return max(baggage_count - _FREE_BAGS[membership_level][cabin_class], 0) * 50

    def update_balance(self, user: dict[str, Any], payment_method: str, amount: float) -> bool:
        key = {"cash": "cash_balance", "bank": "bank_balance"}.get(payment_method)
        if key is None:
            return True
        if user[key] + amount < 0:
            return False
        user[key] += amount
        return True

    def reserve_flight(self, user_id: str, password: str, flight_no: str, cabin: str, payment_method: str,
                       baggage_count: int) -> str:
        # ACEBench does not stop on a failed login or an unknown flight: the lookups below then raise,
        # which the executor reports as an error; kept so that such calls fail the same way.
        user = self.authenticate_user(user_id, password)
        flight = self._flight(flight_no, available=True)
        total = flight["economy_price"] if cabin == "Economy Class" else flight["business_price"]  # type: ignore[index]
        total += self.calculate_baggage_fee(user["membership_level"], cabin, baggage_count)
        if payment_method not in ("cash", "bank"):
            return "Invalid payment method"
        key = f"{payment_method}_balance"
        if total > self.users[user_id][key]:
            return (f"Your {payment_method} balance is insufficient. Please consider using another payment "
                    "method.")
        self.users[user_id][key] -= total
        flight["seats_available"] -= 1  # type: ignore[index]
        rid = f"res_{len(self.reservations) + 1}"
        self.reservations.append({"reservation_id": rid, "user_id": user_id, "flight_no": flight_no,
                                  "payment_method": payment_method, "cabin": cabin, "baggage": baggage_count})
        return (f"Booking successful. Reservation ID: {rid}. Total cost: {total} yuan (including baggage "
                "fees).")

    def modify_flight(self, user_id: str, reservation_id: str, new_flight_no: str | None = None,
                      new_cabin: str | None = None, add_baggage: int = 0,
                      new_payment_method: str | None = None) -> str:
        res = next((r for r in self.reservations if r["reservation_id"] == reservation_id
                    and r["user_id"] == user_id), None)
        if not res:
            return "Reservation not found or user ID does not match."
        current = self._flight(res["flight_no"])
        if not current:
            return "Flight information not found."
        pay = new_payment_method or res["payment_method"]
        user = self.users[user_id]
        notes = []
        if new_flight_no and new_flight_no != res["flight_no"]:
            new = self._flight(new_flight_no)
            same_route = new and (new["origin"], new["destination"]) == (current["origin"],
                                                                         current["destination"])
            if not same_route:
                return "Flight change failed: Invalid new flight number or destination does not match."
            res["flight_no"] = new_flight_no
            notes.append("Flight number has been changed.")
        if new_cabin and new_cabin != res.get("cabin"):
            prices = {"Economy Class": current["economy_price"], "Business Class": current["business_price"]}
            diff = prices.get(new_cabin, 0) - prices.get(res["cabin"], 0)
            res["cabin"] = new_cabin
            if diff > 0:
                ok = self.update_balance(user, pay, -diff)
                notes.append(f"Cabin change successful. Price difference paid: {diff}." if ok
                             else "Insufficient balance to pay the cabin price difference.")
            elif diff < 0:
                self.update_balance(user, pay, -diff)
                notes.append(f"Cabin change successful. Price difference refunded: {-diff}.")
        if add_baggage > 0:
            total = res.get("baggage", 0) + add_baggage
            cost = max(0, total - self.get_baggage_allowance(user["membership_level"], res["cabin"])) * 50
            if cost > 0:
                ok = self.update_balance(user, pay, -cost)
                notes.append(f"Baggage has been added. Additional fee to be paid: {cost}." if ok
                             else "Insufficient balance to pay the additional baggage fees.")
            res["baggage"] = total
        return " ".join(notes or ["Modification completed with no additional fees."])

    def cancel_reservation(self, user_id: str, reservation_id: str, reason: str) -> str:
        now = datetime(2024, 7, 14, 6, 0, 0)  # ACEBench's fixed "current time"
        user = self.users.get(user_id)
        if not user:
            return "Invalid user ID."
        res = next((r for r in self.reservations if r["reservation_id"] == reservation_id
                    and r["user_id"] == user_id), None)
        if not res:
            return "Invalid reservation ID or it does not belong to the user."
        flight = self._flight(res["flight_no"])
        if not flight:
            return "Invalid flight information."
        depart = datetime.strptime(flight["depart_time"], _TIME)
        if now > depart:
            return "The flight segment has been used and cannot be canceled."
        price = flight["economy_price"] if res["cabin"] == "Economy Class" else flight["business_price"]
        # the reservation itself stays in the list (ACEBench only refunds)
        if reason == "The airline has canceled the flight.":
            user["cash_balance"] += price
            return (f"The flight has been canceled. Your reservation will be canceled free of charge, and "
                    f"{price} yuan has been refunded.")
        if depart - now > timedelta(days=1):
            user["cash_balance"] += price
            return (f"More than 24 hours before departure. Free cancellation successful, {price} yuan has "
                    "been refunded.")
        fee = price * 0.1
        user["cash_balance"] += price - fee
        return (f"Less than 24 hours before departure. A cancellation fee of {fee} yuan has been deducted, "
                f"and {price - fee} yuan has been refunded.")
