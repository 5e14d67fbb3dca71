"""solarian_agent.sim"""
