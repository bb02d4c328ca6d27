"""Initial databases of the API-Bank tools whose state calls change or whose records tokens and ids index.

Reproduced whole from AlibabaResearch/DAMO-ConvAI `api-bank/init_database/` (each table names its file): the
official tool manager loads these files into every freshly initialised tool; ours deep-copies them.
"""

from __future__ import annotations

from typing import Any

DATABASES: dict[str, Any] = {}

# api-bank/init_database/Account.json
DATABASES['Account'] = {
    'JohnDoe': {'password': 'pass123', 'token': 'a9s8d7f6g5h4j3k2l1', 'email': 'johndoe@example.com'},
    'JaneSmith': {'password': 'password', 'token': 'o8i7u6y5t4r3e2w1q0', 'email': 'janesmith@example.com'},
    'testuser': {'password': 'testpass', 'token': 'p9o8i7u6y5t4k3e2w1q', 'email': 'testuser@example.com'},
    'foo': {'password': 'bar', 'token': 'z9x8c7v6b5n4m3q2w1', 'email': 'foo@example.com'},
    'newuser': {'password': 'newpass', 'token': 'l9k8j7h6g5f4d3s2a1', 'email': 'newuser@example.com'},
    'admin': {'password': 'adminpass', 'token': 'm9n8b7v6c5x4z3a2s1', 'email': 'admin@example.com'},
    'user1': {'password': 'user1pass', 'token': 'n9m8k7j6h5g4f3d2s1a0', 'email': 'user1@example.com'},
    'user2': {'password': 'user2pass', 'token': 'o9i8u7y6t5r4e3w2q1', 'email': 'user2@example.com'},
    'user3': {'password': 'user3pass', 'token': 'p9o8i7u6y5t4r3e2w1q', 'email': 'user3@example.com'},
    'user4': {'password': 'user4pass', 'token': 'q9w8e7r6t5y4u3i2o1', 'email': 'user4@example.com'},
}

# api-bank/init_database/Bank.json
DATABASES['Bank'] = {
    'JohnDoe': {'balance': 2739.25, 'age': 29, 'city': 'New York'},
    'JaneSmith': {'balance': 410.87, 'age': 38, 'city': 'Los Angeles'},
    'testuser': {'balance': 1935.44, 'age': 27, 'city': 'Chicago'},
    'foo': {'balance': 682.01, 'age': 45, 'city': 'Houston'},
    'newuser': {'balance': 1047.19, 'age': 23, 'city': 'Philadelphia'},
    'admin': {'balance': 3296.52, 'age': 34, 'city': 'Phoenix'},
    'user1': {'balance': 617.93, 'age': 50, 'city': 'San Antonio'},
    'user2': {'balance': 215.66, 'age': 28, 'city': 'San Diego'},
    'user3': {'balance': 1683.29, 'age': 33, 'city': 'Dallas'},
    'user4': {'balance': 825.07, 'age': 26, 'city': 'San Jose'},
}

# api-bank/init_database/Agenda.json
DATABASES['Agenda'] = {
    '1': {
        'content': 'Meeting with client',
        'time': '2023-03-18',
        'location': '123 Main St',
        'username': 'JohnDoe',
    },
    '2': {
        'content': 'Gym workout',
        'time': '2023-03-16',
        'location': '24 Hour Fitness',
        'username': 'JaneSmith',
    },
    '3': {
        'content': 'Dinner with friends',
        'time': '2023-03-20',
        'location': 'Cheesecake Factory',
        'username': 'testuser',
    },
    '4': {
        'content': 'Shopping for groceries',
        'time': '2023-03-17',
        'location': 'Walmart',
        'username': 'foo',
    },
    '5': {
        'content': 'Pick up dry cleaning',
        'time': '2023-03-21',
        'location': 'Cleaners',
        'username': 'newuser',
    },
    '6': {'content': 'Team meeting', 'time': '2023-03-16', 'location': 'Office', 'username': 'admin'},
    '7': {
        'content': 'Dentist appointment',
        'time': '2023-03-22',
        'location': '123 Dental',
        'username': 'user1',
    },
    '8': {
        'content': 'Lunch with coworker',
        'time': '2023-03-18',
        'location': 'Cafeteria',
        'username': 'user2',
    },
    '9': {
        'content': 'Movie night with family',
        'time': '2023-03-19',
        'location': 'Cinemark',
        'username': 'user3',
    },
    '10': {
        'content': 'Volunteer at homeless shelter',
        'time': '2023-03-17',
        'location': 'Hope Center',
        'username': 'user4',
    },
}

# api-bank/init_database/Alarm.json
DATABASES['Alarm'] = {
    '1': {'time': '2023-03-16 07:00:00', 'username': 'JohnDoe'},
    '2': {'time': '2023-03-20 06:30:00', 'username': 'JaneSmith'},
    '3': {'time': '2023-03-18 19:15:00', 'username': 'testuser'},
    '4': {'time': '2023-03-17 12:45:00', 'username': 'foo'},
    '5': {'time': '2023-03-22 22:00:00', 'username': 'newuser'},
    '6': {'time': '2023-03-19 05:50:00', 'username': 'admin'},
    '7': {'time': '2023-03-21 15:30:00', 'username': 'user1'},
    '8': {'time': '2023-03-23 18:20:00', 'username': 'user2'},
    '9': {'time': '2023-03-24 09:00:00', 'username': 'user3'},
    '10': {'time': '2023-03-25 14:10:00', 'username': 'user4'},
}

# api-bank/init_database/Reminder.json
DATABASES['Reminder'] = {
    '1': {'content': 'Call mom', 'time': '2023-03-16 14:30:00', 'username': 'JohnDoe'},
    '2': {'content': 'Buy groceries', 'time': '2023-03-15 18:00:00', 'username': 'JaneSmith'},
    '3': {'content': 'Submit report', 'time': '2023-03-17 09:00:00', 'username': 'testuser'},
    '4': {'content': 'Feed the cat', 'time': '2023-03-15 20:00:00', 'username': 'foo'},
    '5': {'content': 'Attend meeting', 'time': '2023-03-18 10:30:00', 'username': 'newuser'},
    '6': {'content': 'Pay bills', 'time': '2023-03-20 12:00:00', 'username': 'admin'},
    '7': {'content': 'Prepare presentation', 'time': '2023-03-19 15:00:00', 'username': 'user1'},
    '8': {'content': 'Book flight tickets', 'time': '2023-03-22 08:00:00', 'username': 'user2'},
    '9': {'content': 'Submit proposal', 'time': '2023-03-25 14:00:00', 'username': 'user3'},
    '10': {'content': 'Call dentist', 'time': '2023-03-16 16:30:00', 'username': 'user4'},
}

# api-bank/init_database/Meeting.json
DATABASES['Meeting'] = {
    '1': {
        'meeting_topic': 'Sales Meeting',
        'start_time': '2023-03-20 14:00:00',
        'end_time': '2023-03-20 16:00:00',
        'location': 'Conference Room A',
        'attendees': ['John Smith', 'Jane Doe'],
        'username': 'JohnDoe',
    },
    '2': {
        'meeting_topic': 'Team Building Activity',
        'start_time': '2023-04-01 10:00:00',
        'end_time': '2023-04-01 12:00:00',
        'location': 'Recreation Center',
        'attendees': ['Jackie Lee', 'Mike Chen'],
        'username': 'JaneSmith',
    },
    '3': {
        'meeting_topic': 'Marketing Campaign Planning',
        'start_time': '2023-03-22 09:00:00',
        'end_time': '2023-03-22 11:00:00',
        'location': 'Marketing Department',
        'attendees': ['Karen Zhang', 'Mark Brown', 'Timothy Lee'],
        'username': 'testuser',
    },
    '4': {
        'meeting_topic': 'Product Launch Meeting',
        'start_time': '2023-03-25 13:30:00',
        'end_time': '2023-03-25 15:30:00',
        'location': 'Executive Conference Room',
        'attendees': ['Jane Lee', 'Tom Smith'],
        'username': 'foo',
    },
    '5': {
        'meeting_topic': 'New Employee Orientation',
        'start_time': '2023-03-27 09:00:00',
        'end_time': '2023-03-27 11:00:00',
        'location': 'Training Room',
        'attendees': ['David Wang', 'Amy Chen', 'Erica Liu'],
        'username': 'newuser',
    },
    '6': {
        'meeting_topic': 'Board Meeting',
        'start_time': '2023-04-05 15:00:00',
        'end_time': '2023-04-05 17:00:00',
        'location': 'Boardroom',
        'attendees': ['Board Members'],
        'username': 'admin',
    },
    '7': {
        'meeting_topic': 'Project Review',
        'start_time': '2023-03-2410:00:00',
        'end_time': '2023-03-24 12:00:00',
        'location': 'Project Management Office',
        'attendees': ['Emily Zhang', 'Steven Wang', 'Jason Chen'],
        'username': 'user1',
    },
    '8': {
        'meeting_topic': 'Design Team Meeting',
        'start_time': '2023-03-26 11:00:00',
        'end_time': '2023-03-26 13:00:00',
        'location': 'Design Studio',
        'attendees': ['Lucas Wang', 'Michelle Chen'],
        'username': 'user2',
    },
    '9': {
        'meeting_topic': 'Finance Meeting',
        'start_time': '2023-03-23 14:00:00',
        'end_time': '2023-03-23 16:00:00',
        'location': 'Finance Department',
        'attendees': ['Kevin Zhang', 'Andrew Liu', 'Lily Chen'],
        'username': 'user3',
    },
    '10': {
        'meeting_topic': 'Product Development Meeting',
        'start_time': '2023-03-29 10:00:00',
        'end_time': '2023-03-29 12:00:00',
        'location': 'Research and Development Department',
        'attendees': ['Robert Lee', 'Anna Zhang', 'Tony Wang'],
        'username': 'user4',
    },
}

# api-bank/init_database/Appointments.json
DATABASES['Appointments'] = {
    '12345678': {'patient_name': 'John Doe', 'date': '2023-04-12', 'doctor_name': 'Dr. Smith'},
    '23456789': {'patient_name': 'Jane Smith', 'date': '2023-05-20', 'doctor_name': 'Dr. Johnson'},
    '34567890': {'patient_name': 'Robert Lee', 'date': '2023-03-25', 'doctor_name': 'Dr. Kim'},
    '45678901': {'patient_name': 'Alice Chen', 'date': '2023-06-15', 'doctor_name': 'Dr. Wang'},
    '56789012': {'patient_name': 'David Brown', 'date': '2023-04-10', 'doctor_name': 'Dr. Davis'},
    '67890123': {'patient_name': 'Emily Lee', 'date': '2023-07-01', 'doctor_name': 'Dr. Lee'},
    '78901234': {'patient_name': 'Sarah Johnson', 'date': '2023-08-05', 'doctor_name': 'Dr. Chen'},
    '89012345': {'patient_name': 'Michael Kim', 'date': '2023-09-02', 'doctor_name': 'Dr. Brown'},
    '90123456': {'patient_name': 'Olivia Davis', 'date': '2023-10-10', 'doctor_name': 'Dr. Smith'},
    '01234567': {'patient_name': 'William Wang', 'date': '2023-11-12', 'doctor_name': 'Dr. Johnson'},
}

# api-bank/init_database/HealthData.json
DATABASES['HealthData'] = {
    'A12345': [{'time': '2023-03-15 10:30:00', 'blood_pressure': [120, 80], 'heart_rate': 80}],
    'B67890': [{'time': '2023-03-15 08:45:00', 'blood_sugar': 85, 'weight': 68.5}],
    'C24680': [
        {
            'time': '2023-03-14 15:20:00',
            'cholesterol': 200,
            'triglycerides': 150,
            'blood_pressure': [130, 90],
        },
    ],
    'D13579': [
        {
            'time': '2023-03-14 12:00:00',
            'blood_pressure': [110, 70],
            'heart_rate': 75,
            'body_temperature': 37.1,
        },
    ],
    'E97531': [{'time': '2023-03-13 22:30:00', 'blood_pressure': [140, 90], 'weight': 80.2}],
    'F24681': [{'time': '2023-03-13 18:15:00', 'blood_sugar': 102, 'heart_rate': 95}],
    'G46801': [
        {'time': '2023-03-12 09:00:00', 'blood_pressure': [120, 80], 'weight': 63.7, 'cholesterol': 180},
    ],
    'H13579': [
        {
            'time': '2023-03-12 07:30:00',
            'blood_pressure': [130, 85],
            'triglycerides': 110,
            'heart_rate': 75,
        },
    ],
    'I97531': [{'time': '2023-03-11 17:45:00', 'weight': 79.8, 'body_temperature': 37.5}],
    'J46801': [
        {
            'time': '2023-03-11 14:20:00',
            'blood_pressure': [140, 90],
            'triglycerides': 130,
            'heart_rate': 85,
        },
    ],
}

# api-bank/init_database/Hotel.json
DATABASES['Hotel'] = {
    '1': {
        'hotel_name': 'Hilton',
        'check_in_time': '2023-04-01',
        'check_out_time': '2023-04-05',
        'room_count': 2,
        'adult_count': 4,
        'child_count': 2,
    },
    '2': {
        'hotel_name': 'Marriott',
        'check_in_time': '2023-05-15',
        'check_out_time': '2023-05-20',
        'room_count': 1,
        'adult_count': 2,
        'child_count': 1,
    },
    '3': {
        'hotel_name': 'Ritz Carlton',
        'check_in_time': '2023-06-10',
        'check_out_time': '2023-06-12',
        'room_count': 1,
        'adult_count': 1,
        'child_count': 0,
    },
    '4': {
        'hotel_name': 'Intercontinental',
        'check_in_time': '2023-07-04',
        'check_out_time': '2023-07-08',
        'room_count': 3,
        'adult_count': 6,
        'child_count': 3,
    },
    '5': {
        'hotel_name': 'Sheraton',
        'check_in_time': '2023-08-20',
        'check_out_time': '2023-08-23',
        'room_count': 1,
        'adult_count': 3,
        'child_count': 0,
    },
    '6': {
        'hotel_name': 'Holiday Inn',
        'check_in_time': '2023-09-01',
        'check_out_time': '2023-09-05',
        'room_count': 2,
        'adult_count': 4,
        'child_count': 1,
    },
    '7': {
        'hotel_name': 'Westin',
        'check_in_time': '2023-10-10',
        'check_out_time': '2023-10-15',
        'room_count': 1,
        'adult_count': 2,
        'child_count': 0,
    },
    '8': {
        'hotel_name': 'Hyatt',
        'check_in_time': '2023-11-20',
        'check_out_time': '2023-11-24',
        'room_count': 1,
        'adult_count': 1,
        'child_count': 0,
    },
    '9': {
        'hotel_name': 'Four Seasons',
        'check_in_time': '2023-12-24',
        'check_out_time': '2023-12-28',
        'room_count': 2,
        'adult_count': 4,
        'child_count': 2,
    },
    '10': {
        'hotel_name': 'Mandarin Oriental',
        'check_in_time': '2024-01-15',
        'check_out_time': '2024-01-20',
        'room_count': 1,
        'adult_count': 2,
        'child_count': 0,
    },
}

# api-bank/init_database/Scenes.json
DATABASES['Scenes'] = {
    'relaxing time': [
        {'name': 'light', 'description': 'Smart light in the living room'},
        {'name': 'air conditioner', 'description': 'Smart air conditioner in the bedroom'},
        {'name': 'sound system', 'description': 'Smart sound system in the living room'},
    ],
    'cooking time': [
        {'name': 'light', 'description': 'Smart light in the kitchen'},
        {'name': 'oven', 'description': 'Smart oven in the kitchen'},
        {'name': 'range hood', 'description': 'Smart range hood in the kitchen'},
    ],
    'movie time': [
        {'name': 'light', 'description': 'Smart light in the living room'},
        {'name': 'sound system', 'description': 'Smart sound system in the living room'},
        {'name': 'tv', 'description': 'Smart TV in the living room'},
    ],
    'bedtime': [
        {'name': 'air conditioner', 'description': 'Smart air conditioner in the bedroom'},
        {'name': 'humidifier', 'description': 'Smart humidifier in the bedroom'},
    ],
    'morning routine': [
        {'name': 'light', 'description': 'Smart light in the living room'},
        {'name': 'coffee maker', 'description': 'Smart coffee maker in the kitchen'},
        {'name': 'blinds', 'description': 'Smart blinds in the living room'},
    ],
    'afternoon nap': [
        {'name': 'air conditioner', 'description': 'Smart air conditioner in the bedroom'},
        {'name': 'smart curtain', 'description': 'Smart curtain in the bedroom'},
        {'name': 'sound system', 'description': 'Smart sound system in the living room'},
    ],
    'study time': [
        {'name': 'light', 'description': 'Smart light in the living room'},
        {'name': 'smart desk', 'description': 'Smart desk in the study room'},
        {'name': 'air purifier', 'description': 'Smart air purifier in the study room'},
    ],
    'outdoor party': [
        {'name': 'outdoor light', 'description': 'Smart outdoor light'},
        {'name': 'outdoor speaker', 'description': 'Smart outdoor speaker'},
        {'name': 'smart grill', 'description': 'Smart grill in the backyard'},
    ],
    'gaming time': [
        {'name': 'sound system', 'description': 'Smart sound system in the living room'},
        {'name': 'tv', 'description': 'Smart TV in the living room'},
        {'name': 'gaming chair', 'description': 'Smart gaming chair in the living room'},
    ],
    'yoga time': [
        {'name': 'light', 'description': 'Smart light in the living room'},
        {'name': 'yoga mat', 'description': 'Smart yoga mat in the living room'},
        {'name': 'smart speaker', 'description': 'Smart speaker in the living room'},
    ],
}

# api-bank/init_database/TimeSwitch.json
DATABASES['TimeSwitch'] = {
    'light': [{'time': '2023-03-15 18:30:00', 'on': True}],
    'air conditioner': [{'time': '2023-03-16 07:45:00', 'on': True}],
    'sound system': [{'time': '2023-03-17 22:00:00', 'on': False}],
    'oven': [{'time': '2023-03-18 14:15:00', 'on': False}],
    'range hood': [{'time': '2023-03-19 09:30:00', 'on': True}],
    'tv': [{'time': '2023-03-20 13:00:00', 'on': True}],
    'humidifier': [{'time': '2023-03-21 20:45:00', 'on': False}],
    'coffee Maker': [{'time': '2023-03-22 11:30:00', 'on': True}],
    'blinds': [{'time': '2023-03-23 15:00:00', 'on': False}],
    'smart curtain': [{'time': '2023-03-24 16:30:00', 'on': True}],
}

# api-bank/init_database/Stock.json
DATABASES['Stock'] = {
    'AAPL': {
        '2022-01-01': 180.5,
        '2022-01-02': 182.3,
        '2022-01-03': 184.5,
        '2022-01-04': 185.2,
        '2022-01-05': 182.6,
        '2022-01-06': 180.1,
        '2022-01-07': 181.2,
        '2022-01-08': 181.9,
        '2022-01-09': 181.6,
        '2022-01-10': 183,
    },
    'GOOG': {
        '2021-12-15': 2723.9,
        '2021-12-16': 2730.6,
        '2021-12-17': 2715.3,
        '2021-12-18': 2723.8,
        '2021-12-19': 2722.1,
        '2021-12-20': 2728.9,
        '2021-12-21': 2735.1,
        '2021-12-22': 2738.6,
        '2021-12-23': 2745.4,
        '2021-12-24': 2746.8,
    },
    'TSLA': {
        '2022-02-28': 980.1,
        '2022-03-01': 984.2,
        '2022-03-02': 989.3,
        '2022-03-03': 995.6,
        '2022-03-04': 990.8,
        '2022-03-05': 985.2,
        '2022-03-06': 990.1,
        '2022-03-07': 995.5,
        '2022-03-08': 1000,
        '2022-03-09': 997.2,
    },
    'AMZN': {
        '2022-03-10': 3023.6,
        '2022-03-11': 3012.7,
        '2022-03-12': 3026.1,
        '2022-03-13': 3035.2,
        '2022-03-14': 3031.6,
        '2022-03-15': 3042.9,
        '2022-03-16': 3047.3,
        '2022-03-17': 3055.9,
        '2022-03-18': 3058.4,
        '2022-03-19': 3063.7,
    },
    'MSFT': {
        '2022-01-31': 332.1,
        '2022-02-01': 335.2,
        '2022-02-02': 333.8,
        '2022-02-03': 336.7,
        '2022-02-04': 338.9,
        '2022-02-05': 341.1,
        '2022-02-06': 342.2,
        '2022-02-07': 341.8,
        '2022-02-08': 340.6,
        '2022-02-09': 340.3,
    },
    'NVDA': {
        '2022-02-01': 339.2,
        '2022-02-02': 341.5,
        '2022-02-03': 343.8,
        '2022-02-04': 340.9,
        '2022-02-05': 338.7,
        '2022-02-06': 339.5,
        '2022-02-07': 341.1,
        '2022-02-08': 342.3,
        '2022-02-09': 345,
        '2022-02-10': 347.1,
    },
    'NFLX': {
        '2022-02-15': 602.3,
        '2022-02-16': 603.1,
        '2022-02-17': 605.7,
        '2022-02-18': 610.2,
        '2022-02-19': 612.9,
        '2022-02-20': 615.4,
        '2022-02-21': 614.8,
        '2022-02-22': 615.3,
        '2022-02-23': 614.2,
        '2022-02-24': 613.1,
    },
    'FB': {
        '2022-03-01': 278.9,
        '2022-03-02': 279.8,
        '2022-03-03': 280.5,
        '2022-03-04': 280.2,
        '2022-03-05': 281.6,
        '2022-03-06': 283.4,
        '2022-03-07': 284.2,
        '2022-03-08': 285.7,
        '2022-03-09': 284.9,
        '2022-03-10': 284.1,
    },
    'BABA': {
        '2022-02-28': 156.2,
        '2022-03-01': 157.4,
        '2022-03-02': 158.1,
        '2022-03-03': 159.7,
        '2022-03-04': 160.2,
        '2022-03-05': 160.8,
        '2022-03-06': 160.1,
        '2022-03-07': 160.6,
        '2022-03-08': 160.5,
        '2022-03-09': 160.3,
    },
    'SQ': {
        '2022-03-10': 243.5,
        '2022-03-11': 245.8,
        '2022-03-12': 247.4,
        '2022-03-13': 248.1,
        '2022-03-14': 248.9,
        '2022-03-15': 250.3,
        '2022-03-16': 252.1,
        '2022-03-17': 252.4,
        '2022-03-18': 253.8,
        '2022-03-19': 253.2,
    },
}
