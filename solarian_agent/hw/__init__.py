"""solarian_agent.hw"""
