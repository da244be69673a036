"""The knowledge base (layer: knowledge): the ``KnowledgeBase`` interface, its pymongo
implementation (MongoDB, or mongomock embedded) and the resilient wrapper; it stores events,
effect models, statuses and the planners' and actuators' memory."""
