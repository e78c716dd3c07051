"""World model and belief oracle: agents, rooms, containers, objects, events, and who believes what."""
