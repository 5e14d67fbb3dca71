"""solarian_agent.perception"""
