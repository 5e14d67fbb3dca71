"""solarian_agent.arm"""
