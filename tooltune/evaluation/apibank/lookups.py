"""Look-up tables of the read-only API-Bank tools, and the recorded answers of its online services.

The tables (history, symptoms, documents, recordings, images, Wikipedia) are reproduced from
AlibabaResearch/DAMO-ConvAI `api-bank/init_database/` (each names its file), keeping only the records that the
level-1 / level-2 dialogues look up: each of these APIs' checks compares the looked-up key (or the whole
output), so a call with any other key fails its check whatever the full table would return.
"""

from __future__ import annotations

from typing import Any

LOOKUPS: dict[str, Any] = {}

# api-bank/init_database/History.json (the dates the data queries)
LOOKUPS['History'] = {
    '04-21': [
        {
            'Title': 'First Game of the New York Yankees',
            'Date': '1903-04-21',
            'Description': (
                'The New York Yankees (then known as the New York Highlanders) played their first game in'
                ' franchise history, losing to the Washington Senators by a score of 3-1 at Hilltop Park'
                ' in New York City.'
            ),
        },
        {
            'Title': "The Death of Rome's Founder, Romulus",
            'Date': '717-04-21',
            'Description': (
                'According to legend, Romulus, the founder and first king of Rome, was carried off to'
                ' heaven by a whirlwind on this day.'
            ),
        },
        {
            'Title': 'The Birth of Queen Elizabeth II',
            'Date': '1926-04-21',
            'Description': (
                'Queen Elizabeth II, the current queen of the United Kingdom, was born on this day in'
                ' London.'
            ),
        },
        {
            'Title': 'The Birth of Anthony Quinn',
            'Date': '1915-04-21',
            'Description': (
                'Actor Anthony Quinn, known for his roles in films like Lawrence of Arabia and Zorba the'
                ' Greek, was born on this day in Chihuahua, Mexico.'
            ),
        },
        {
            'Title': 'The Death of Henry VIII',
            'Date': '1547-04-21',
            'Description': (
                'King Henry VIII of England, best known for his many marriages and his role in the English'
                ' Reformation, died on this day at the age of 55.'
            ),
        },
    ],
    '10-06': [
        {
            'Title': 'The Opening of the Second Vatican Council',
            'Date': '1962-10-06',
            'Description': (
                'The Second Vatican Council, a meeting of Catholic bishops from around the world aimed at'
                ' modernizing the Catholic Church, opened on this day in Rome.'
            ),
        },
        {
            'Title': 'The Death of Ralph Vaughan Williams',
            'Date': '1958-10-06',
            'Description': (
                'Ralph Vaughan Williams, the English composer known for his works such as The Lark'
                ' Ascending, Fantasia on a Theme by Thomas Tallis, and the opera Riders to the Sea, died'
                ' on this day in London, England.'
            ),
        },
        {
            'Title': 'The Birth of Carole Lombard',
            'Date': '1908-10-06',
            'Description': (
                'Carole Lombard, the American actress known for her roles in films such as My Man Godfrey,'
                ' To Be or Not to Be, and Nothing Sacred, was born on this day in Fort Wayne, Indiana.'
            ),
        },
        {
            'Title': 'The Death of Thomas Hodgkin',
            'Date': '1866-10-06',
            'Description': (
                'Thomas Hodgkin, the English physician and pathologist known for his work on diseases such'
                " as Hodgkin's lymphoma, died on this day in Jaffa, Palestine (now part of Israel)."
            ),
        },
        {
            'Title': 'The Birth of Thor Heyerdahl',
            'Date': '1914-10-06',
            'Description': (
                'Thor Heyerdahl, the Norwegian adventurer and ethnographer known for his voyages on the'
                ' Kon-Tiki and Ra II rafts, was born on this day in Larvik, Norway.'
            ),
        },
    ],
    '12-10': [
        {
            'Title': 'The Nobel Peace Prize is Awarded to Barack Obama',
            'Date': '2009-12-10',
            'Description': (
                'Barack Obama, the 44th President of the United States, was awarded the Nobel Peace Prize'
                ' on this day for his efforts to strengthen international diplomacy and cooperation'
                ' between peoples.'
            ),
        },
        {
            'Title': 'The Birth of Ada Lovelace',
            'Date': '1815-12-10',
            'Description': (
                "Ada Lovelace, a British mathematician and writer known for her work on Charles Babbage's"
                ' early mechanical general-purpose computer, the Analytical Engine, was born on this day.'
            ),
        },
        {
            'Title': 'The Death of Emily Dickinson',
            'Date': '1886-12-10',
            'Description': (
                'American poet Emily Dickinson, now considered one of the most important poets in the'
                ' English language, died on this day in Amherst, Massachusetts.'
            ),
        },
        {
            'Title': 'The Birth of Kenneth Branagh',
            'Date': '1960-12-10',
            'Description': (
                'Actor and director Kenneth Branagh, known for his adaptations of Shakespeare plays and'
                ' his role in films like Harry Potter and the Chamber of Secrets, was born on this day in'
                ' Belfast, Northern Ireland.'
            ),
        },
        {
            'Title': 'The Ratification of the Universal Declaration of Human Rights',
            'Date': '1948-12-10',
            'Description': (
                'The Universal Declaration of Human Rights, a document that lays out the basic rights and'
                ' freedoms that should be afforded to all people, was adopted and ratified by the United'
                ' Nations on this day.'
            ),
        },
    ],
}

# api-bank/init_database/Symptom.json (the symptoms the data queries)
LOOKUPS['Symptom'] = {
    'abdominal pain': [
        {
            'name': 'Gastritis',
            'description': (
                'An inflammation of the stomach lining that can cause abdominal pain, nausea, and other'
                ' symptoms.'
            ),
            'aid': (
                'Treatment may involve medications to reduce stomach acid and manage symptoms, as well as'
                ' lifestyle changes to avoid triggers.'
            ),
        },
        {
            'name': 'Irritable bowel syndrome',
            'description': (
                'A chronic digestive disorder characterized by abdominal pain, bloating, and changes in'
                ' bowel habits.'
            ),
            'aid': (
                'Treatment may involve dietary changes, stress management techniques, and medications to'
                ' manage symptoms.'
            ),
        },
    ],
    'fatigue': [
        {
            'name': 'Chronic fatigue syndrome',
            'description': (
                'A debilitating condition characterized by persistent fatigue that is not relieved by rest'
                ' and is not due to another underlying medical condition.'
            ),
            'aid': (
                'Treatment may involve a combination of medications, lifestyle changes, and'
                ' cognitive-behavioral therapy to manage symptoms.'
            ),
        },
        {
            'name': 'Anemia',
            'description': (
                'A condition in which the body does not have enough red blood cells or hemoglobin, leading'
                ' to fatigue and weakness.'
            ),
            'aid': (
                'Treatment may involve iron supplements, blood transfusions, or other medications to'
                ' address the underlying cause.'
            ),
        },
        {
            'name': 'Depression',
            'description': 'A mood disorder that can cause feelings of sadness, hopelessness, and fatigue.',
            'aid': (
                'Treatment may involve therapy, medications, or a combination of both to manage symptoms.'
            ),
        },
    ],
    'fever': [
        {
            'name': 'Influenza',
            'description': (
                'A viral infection that can cause fever, cough, sore throat, body aches, and other'
                ' symptoms.'
            ),
            'aid': (
                'Treatment may involve antiviral medications, over-the-counter medications to manage'
                ' symptoms, and rest and fluids to help the body recover.'
            ),
        },
        {
            'name': 'Malaria',
            'description': (
                'A parasitic infection that can cause recurrent episodes of fever, chills, and flu-like'
                ' symptoms.'
            ),
            'aid': (
                'Treatment may involve medications to kill the parasites and manage symptoms, as well as'
                ' preventive measures such as mosquito nets and insect repellent.'
            ),
        },
    ],
    'headache': [
        {
            'name': 'Migraine',
            'description': (
                'A neurological condition characterized by recurrent headaches, often accompanied by other'
                ' symptoms such as nausea, vomiting, and sensitivity to light and sound.'
            ),
            'aid': (
                'Treatment may involve medications to manage symptoms and prevent attacks, lifestyle'
                ' changes to avoid triggers, and in some cases, preventive medications.'
            ),
        },
        {
            'name': 'Tension headache',
            'description': (
                'A type of headache characterized by a dull, aching pain that can be felt on both sides of'
                ' the head.'
            ),
            'aid': (
                'Treatment may involve over-the-counter pain relievers, lifestyle changes, and stress'
                ' management techniques.'
            ),
        },
        {
            'name': 'Cluster headache',
            'description': (
                'A type of headache that occurs in cyclical patterns, with periods of frequent attacks'
                ' followed by periods of remission.'
            ),
            'aid': (
                'Treatment may involve medications to manage symptoms and prevent attacks, as well as'
                ' oxygen therapy and nerve blocks in some cases.'
            ),
        },
    ],
    'nausea': [
        {
            'name': 'Gastroenteritis',
            'description': (
                'An infection or inflammation of the digestive tract that can cause nausea, vomiting,'
                ' diarrhea, and other symptoms.'
            ),
            'aid': (
                'Treatment may involve rest, fluids, and medications to manage symptoms and prevent'
                ' dehydration.'
            ),
        },
        {
            'name': 'Migraine',
            'description': (
                'A neurological condition characterized by recurrent headaches, often accompanied by other'
                ' symptoms such as nausea, vomiting, and sensitivity to light and sound.'
            ),
            'aid': (
                'Treatment may involve medications to manage symptoms and prevent attacks, lifestyle'
                ' changes to avoid triggers, and in some cases, preventive medications.'
            ),
        },
    ],
    'rash': [
        {
            'name': 'Contact dermatitis',
            'description': (
                'A type of rash that occurs when the skin comes into contact with an irritant or allergen.'
            ),
            'aid': (
                'Treatment may involve avoiding irritants, using moisturizers and topical corticosteroids,'
                ' and in severe cases, oral medications or light therapy.'
            ),
        },
        {
            'name': 'Eczema',
            'description': 'A chronic skin condition that can cause dry, itchy patches of skin.',
            'aid': (
                'Treatment may involve avoiding irritants, using moisturizers and topical corticosteroids,'
                ' and in severe cases, oral medications or light therapy.'
            ),
        },
    ],
    'shortness of breath': [
        {
            'name': 'Asthma',
            'description': (
                'A chronic respiratory condition characterized by inflammation and narrowing of the'
                ' airways, leading to shortness of breath, wheezing, and coughing.'
            ),
            'aid': (
                'Treatment may involve inhalers or nebulizers to open the airways, as well as medications'
                ' to manage inflammation and prevent attacks.'
            ),
        },
        {
            'name': 'Pneumonia',
            'description': (
                'An infection of the lungs that can cause fever, cough, shortness of breath, and other'
                ' symptoms.'
            ),
            'aid': (
                'Treatment may involve antibiotics, rest, and fluids to help the body fight the infection'
                ' and recover.'
            ),
        },
    ],
}

# api-bank/init_database/QuestionAnswering.json (the documents the data asks about)
LOOKUPS['QuestionAnswering'] = {'https://www.example.com/article-4.txt': {}}

# api-bank/init_database/SpeechRecognition.json (the recordings the data asks for)
LOOKUPS['SpeechRecognition'] = {
    'https://example.com/voice22.wav': "What's the best way to get to the beach from here?",
}

# api-bank/init_database/ImageCaptioning.json (the images the data asks for)
LOOKUPS['ImageCaptioning'] = [
    {
        'url': (
            'http://l7.alamy.com/zooms/278b12a987734ec285da7155397e0d0a/an-airplane-takes-off-from-t'
            'erminal-1-at-manchester-international-h4b040.jpg'
        ),
        'caption': 'an airplane takes off taken on a cloudy autumn evening',
    },
]

# api-bank/init_database/Wiki.json (searched keywords; url and summary, the fields returned)
LOOKUPS['Wiki'] = {
    'artificial intelligence': {
        'url': 'https://en.wikipedia.org/wiki/Artificial_intelligence',
        'summary': (
            'Artificial intelligence (AI) is intelligence demonstrated by machines, as opposed to'
            ' intelligence of humans and other animals. Example tasks in which this is done include speech'
            ' recognition, computer vision, translation between (natural) languages, as well as other'
            ' mappings of inputs.\nAI applications include advanced web search engines (e.g., Google'
            ' Search), recommendation systems (used by YouTube, Amazon, and Netflix), understanding human'
            ' speech (such as Siri and Alexa), self-driving cars (e.g., Waymo), generative or creative'
            ' tools (ChatGPT and AI art), automated decision-making, and competing at the highest level in'
            ' strategic game systems (such as chess and Go).As machines become increasingly capable, tasks'
            ' considered to require "intelligence" are often removed from the definition of AI, a'
            ' phenomenon known as the AI effect.'
        ),
    },
}

# Answers of the services that need a network or a model (Dictionary: api.dictionaryapi.dev; Translate:
# Google Translate; SearchEngine: BM25 with NLTK tokenisation; ToolSearcher: paraphrase-MiniLM-L3-v2
# embeddings), as the level-1 / level-2 dialogue files record them for the requests they make. ToolSearcher
# keeps the best-matching tool name only: its output is rebuilt from the current descriptions (specs.py), as
# the official tool does.
RECORDED: dict[str, dict[Any, Any]] = {}
RECORDED['ToolSearcher'] = {
    'Query Registration': 'QueryRegistration',
    'Query Stock': 'QueryStock',
    'QueryHealthData': 'QueryHealthData',
    'add reminder': 'AddReminder',
    'add schedule': 'AddAgenda',
    'agenda meeting scheduler': 'AddAgenda',
    'alarm': 'AddAlarm',
    'alarm clock': 'QueryAlarm',
    'book hotel': 'BookHotel',
    'book hotel Hilton July 15 2023': 'BookHotel',
    'book meeting': 'BookHotel',
    'calculate 25*3+7/3': 'Calculator',
    'calculate the square of 8': 'Calculator',
    'current date': 'GetToday',
    'delete account': 'DeleteAccount',
    'delete agenda': 'DeleteAgenda',
    'delete agenda March 18th 2 pm 123 Main St client': 'DeleteAgenda',
    'delete alarm': 'DeleteAlarm',
    'delete reservation': 'DeleteMeeting',
    'emergency knowledge': 'EmergencyKnowledge',
    'health record': 'RecordHealthData',
    'history October 6 2023': 'QueryHistoryToday',
    'history October 6th': 'QueryHistoryToday',
    'hospital appointment registration': 'AppointmentRegistration',
    'hotel booking': 'BookHotel',
    'illness rash': 'SymptomSearch',
    'meeting cancellation': 'ModifyMeeting',
    'meeting reservation query': 'AddMeeting',
    'modify appointment': 'ModifyRegistration',
    'modify reservation for a meeting': 'ModifyMeeting',
    'modify schedule item': 'ModifyAgenda',
    'query meeting': 'QueryMeeting',
    'rash': 'SymptomSearch',
    'record health data': 'RecordHealthData',
    'registration query patient': 'QueryRegistration',
    'reminder': 'AddReminder',
    'reminder modify': 'ModifyReminder',
    'schedule meeting': 'QueryAgenda',
    'set alarm': 'AddAlarm',
    'skin rash': 'SymptomSearch',
}
RECORDED['Dictionary'] = {
    'perplexed': [
        {
            'partOfSpeech': 'verb',
            'definitions': [
                {'definition': 'To cause to feel baffled; to puzzle.', 'synonyms': [], 'antonyms': []},
                {
                    'definition': 'To involve; to entangle; to make intricate or complicated.',
                    'synonyms': [],
                    'antonyms': [],
                },
                {'definition': 'To plague; to vex; to torment.', 'synonyms': [], 'antonyms': []},
            ],
            'synonyms': [],
            'antonyms': [],
        },
        {
            'partOfSpeech': 'adjective',
            'definitions': [
                {'definition': 'Confused or puzzled.', 'synonyms': [], 'antonyms': []},
                {'definition': 'Bewildered.', 'synonyms': [], 'antonyms': []},
            ],
            'synonyms': [],
            'antonyms': [],
        },
    ],
    'plethora': [
        {
            'partOfSpeech': 'noun',
            'definitions': [
                {
                    'definition': '(usually followed by of) An excessive amount or number; an abundance.',
                    'synonyms': [],
                    'antonyms': [],
                    'example': 'The menu offers a plethora of cuisines from around the world.',
                },
                {
                    'definition': 'An excess of red blood cells or bodily humours.',
                    'synonyms': [],
                    'antonyms': [],
                },
            ],
            'synonyms': ['glut', 'myriad', 'slew', 'superfluity', 'surfeit'],
            'antonyms': [],
        },
    ],
    'resilience': [
        {
            'partOfSpeech': 'noun',
            'definitions': [
                {
                    'definition': (
                        'The mental ability to recover quickly from depression, illness or misfortune.'
                    ),
                    'synonyms': [],
                    'antonyms': [],
                },
                {
                    'definition': (
                        'The physical property of material that can resume its shape after being stretched'
                        ' or deformed; elasticity.'
                    ),
                    'synonyms': [],
                    'antonyms': [],
                },
                {
                    'definition': (
                        'The positive capacity of an organizational system or company to adapt and return'
                        ' to equilibrium due to the consequences of a crisis or failure caused by any type'
                        ' of disruption, including: an outage, natural disasters, man-made disasters,'
                        ' terrorism, or similar (particularly IT systems, archives).'
                    ),
                    'synonyms': [],
                    'antonyms': [],
                },
            ],
            'synonyms': [],
            'antonyms': [],
        },
    ],
}
RECORDED['Translate'] = {
    ('Hello', None, 'es'): 'Hola',
    ('Hello, how are you?', None, 'fr'): 'Bonjour comment allez-vous?',
    ('The quick brown fox jumps over the lazy dog.', None, 'es'): (
        'El veloz zorro marrón salta sobre el perro perezoso.'
    ),
    ('hello', None, 'fr'): 'Bonjour',
}
RECORDED['SearchEngine'] = {
    'the sustainable development': [
        {
            'title': 'What Are the Sustainable Development Goals?',
            'url': 'https://sdgs.un.org/goals',
            'abstract': (
                'The Sustainable Development Goals (SDGs) are a universal call to action to end poverty,'
                ' protect the planet, and ensure that all people enjoy peace and prosperity.'
            ),
        },
        {
            'title': 'Role of Education in Achieving the Sustainable Development Goals',
            'url': 'https://en.unesco.org/themes/education-sustainable-development-goals',
            'abstract': (
                'Education is a fundamental pillar of the SDGs, as it empowers individuals, promotes'
                ' social and economic development, and fosters sustainable lifestyles and values.'
            ),
        },
    ],
}
