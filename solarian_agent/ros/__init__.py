"""solarian_agent.ros"""
