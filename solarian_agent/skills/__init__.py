"""solarian_agent.skills"""
