"""solarian_agent.models"""
